// The MSA lightning indexer's block selection over paged index keys, the CPU twin of the GPU
// scoring + per-group top-k kernel. For each index head h (= KV group) and row r at position p
// of its sequence (paged_layout.h):
//   score[j]  = index_q[r, h] . index_k[j]  for the sequence's keys j <= p (float32, no scale);
//   block[b]  = max of score over the keys of block b, b <= p / block_size;
//   the local_blocks blocks p / block_size, p / block_size - 1, ... (clamped at 0) forced in;
//   keep the top min(topk, p / block_size + 1) blocks, by descending score, ties to the lower
//   block; the rest of the row's topk slots are -1.
// Index keys are pages [pages, page_size, head_dim]; index_q [rows, heads, head_dim];
// selected [heads, rows, topk].
#pragma once

#include <cstdint>

#include "kernels/cpu/msa_indexer.h"
#include "kernels/cpu/paged_layout.h"

namespace m3::kernels::cpu {

void PagedIndexerSelectBlocks(const float* index_q, const float* index_k_pages,
                              const PagedLayout& layout, const IndexerParams& p, int32_t* selected);

}  // namespace m3::kernels::cpu
