// The MSA lightning indexer over paged index keys on the GPU, the twin of
// kernels/cpu/paged_msa_indexer.h: per (index head = KV group, row), block scores = the max over
// each key block of q . k over the row's visible keys [0, pos], the local_blocks blocks ending
// at the row's own forced in (+inf), then the top-k blocks by descending score, ties to the
// lower block, -1 padded. index_q [rows, heads, dim] bf16, index_k_pages [slots, dim] bf16,
// selected i32 [heads, rows, topk]; dot products in f32.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/paged_layout.cuh"

namespace m3::kernels::cuda {

struct IndexerParams {
  int64_t num_heads = 0;
  int64_t head_dim = 0;  // at most 256
  int64_t block_size = 0;
  int64_t topk_blocks = 0;
  int64_t local_blocks = 0;
};

// max_seq_len: the longest context + rows of any sequence in the layout (sizes the per-row
// block-score buffer in shared memory).
void PagedIndexerSelectBlocks(const bf16* index_q, const bf16* index_k_pages,
                              const PagedLayout& layout, const IndexerParams& p,
                              int64_t max_seq_len, int32_t* selected, cudaStream_t stream);

}  // namespace m3::kernels::cuda
