// The MSA lightning indexer's block selection (scoring + top-k), given normed and rotated
// index queries and keys:
//   score[h, i, j]   = idx_q[i, h] . idx_k[j]  (float32, no scale), -inf where j > q_pos[i];
//   block[h, i, b]   = max over the keys of block b (keys padded to a whole block with -inf);
//   the `local_blocks` blocks q_block, q_block - 1, ... (clamped at 0) get +inf;
//   keep the top-min(topk, num_blocks) blocks per (h, i); a kept block scoring -inf is -1.
// Ties keep the lower block index first; callers compare selections as sets.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

struct IndexerParams {
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;
  int64_t topk_blocks = 0;
  int64_t local_blocks = 0;
};

// Slots per row: min(topk_blocks, ceil(tk / block_size)).
int64_t IndexerSlots(const IndexerParams& p, int64_t tk);

// idx_q [tq, num_heads, head_dim], idx_k [tk, head_dim]; out [num_heads, tq, IndexerSlots].
void IndexerSelectBlocks(const float* idx_q, int64_t tq, const float* idx_k, int64_t tk,
                         const int64_t* q_pos, const IndexerParams& p, int64_t* out);

}  // namespace m3::kernels::cpu
