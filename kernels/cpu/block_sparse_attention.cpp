// BlockSparseAttention: turns each (group, query) selection into sorted key ranges and reuses
// AttendRanges, so the softmax runs over exactly the keys the reference's block mask keeps.
#include "kernels/cpu/block_sparse_attention.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/parallel_for.h"

namespace m3::kernels::cpu {

void BlockSparseAttention(const float* q, int64_t tq, const float* k, const float* v, int64_t tk,
                          const AttentionDims& dims, const int64_t* q_pos,
                          const int64_t* block_indices, int64_t topk, int64_t block_size,
                          float* out) {
  const int64_t hq = dims.num_q_heads, hkv = dims.num_kv_heads, d = dims.head_dim;
  const int64_t group = hq / hkv;
  ParallelFor(tq * hq, 8, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> blocks;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (int64_t row = begin; row < end; ++row) {
      int64_t i = row / hq, h = row % hq, g = h / group;
      const int64_t* sel = block_indices + (g * tq + i) * topk;
      blocks.assign(sel, sel + topk);
      std::sort(blocks.begin(), blocks.end());
      blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
      int64_t last_key = std::min(tk - 1, q_pos[i]);  // causal limit
      ranges.clear();
      for (int64_t b : blocks) {
        if (b < 0) continue;
        int64_t kb = b * block_size, ke = std::min(last_key + 1, kb + block_size);
        if (kb < ke) ranges.emplace_back(kb, ke);
      }
      AttendRanges(q + (i * hq + h) * d, k + g * d, v + g * d, hkv * d, d, dims.scale, ranges,
                   out + (i * hq + h) * d);
    }
  });
}

}  // namespace m3::kernels::cpu
