// IndexerSelectBlocks: per (head, query) row, block maxima then a partial sort.
#include "kernels/cpu/msa_indexer.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu/parallel_for.h"

namespace m3::kernels::cpu {

int64_t IndexerSlots(const IndexerParams& p, int64_t tk) {
  int64_t blocks = (tk + p.block_size - 1) / p.block_size;
  return std::min(p.topk_blocks, blocks);
}

void IndexerSelectBlocks(const float* idx_q, int64_t tq, const float* idx_k, int64_t tk,
                         const int64_t* q_pos, const IndexerParams& p, int64_t* out) {
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const float kPosInf = std::numeric_limits<float>::infinity();
  const int64_t num_blocks = (tk + p.block_size - 1) / p.block_size;
  const int64_t slots = IndexerSlots(p, tk);
  const int64_t dim = p.head_dim;
  ParallelFor(p.num_heads * tq, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> block_score(num_blocks);
    std::vector<int64_t> order(num_blocks);
    for (int64_t row = begin; row < end; ++row) {
      int64_t h = row / tq, i = row % tq;
      const float* qv = idx_q + (i * p.num_heads + h) * dim;
      std::fill(block_score.begin(), block_score.end(), kNegInf);
      int64_t last = std::min(tk - 1, q_pos[i]);
      for (int64_t j = 0; j <= last; ++j) {
        const float* kv = idx_k + j * dim;
        float s = 0.0f;
        for (int64_t d = 0; d < dim; ++d) s += qv[d] * kv[d];
        float& b = block_score[j / p.block_size];
        b = std::max(b, s);
      }
      int64_t q_block = q_pos[i] / p.block_size;
      for (int64_t l = 0; l < p.local_blocks; ++l) {
        int64_t b = std::max<int64_t>(0, q_block - l);
        if (b < num_blocks) block_score[b] = kPosInf;
      }
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + slots, order.end(),
                        [&](int64_t a, int64_t b) {
                          if (block_score[a] != block_score[b])
                            return block_score[a] > block_score[b];
                          return a < b;
                        });
      int64_t* o = out + (h * tq + i) * slots;
      for (int64_t s = 0; s < slots; ++s) o[s] = block_score[order[s]] == kNegInf ? -1 : order[s];
    }
  });
}

}  // namespace m3::kernels::cpu
