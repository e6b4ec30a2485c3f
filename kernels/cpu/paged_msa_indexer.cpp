// PagedIndexerSelectBlocks: per (head, row), block maxima over the row's visible keys read
// through the block table, then a partial sort.
#include "kernels/cpu/paged_msa_indexer.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu/parallel_for.h"

namespace m3::kernels::cpu {

void PagedIndexerSelectBlocks(const float* index_q, const float* index_k_pages,
                              const PagedLayout& layout, const IndexerParams& p,
                              int32_t* selected) {
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const float kPosInf = std::numeric_limits<float>::infinity();
  const int64_t rows = layout.rows(), dim = p.head_dim, B = p.block_size, ps = layout.page_size;
  ParallelFor(p.num_heads * rows, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> block_score;
    std::vector<int64_t> order;
    for (int64_t idx = begin; idx < end; ++idx) {
      const int64_t h = idx / rows, r = idx % rows;
      const int64_t s = layout.SeqOf(r), pos = layout.PositionOf(s, r);
      const int32_t* pages = layout.Pages(s);
      const float* qv = index_q + (r * p.num_heads + h) * dim;
      const int64_t num_blocks = pos / B + 1;
      block_score.assign(num_blocks, kNegInf);
      for (int64_t j = 0; j <= pos; ++j) {
        const float* kv = index_k_pages + (int64_t{pages[j / ps]} * ps + j % ps) * dim;
        float sc = 0.0f;
        for (int64_t d = 0; d < dim; ++d) sc += qv[d] * kv[d];
        float& b = block_score[j / B];
        b = std::max(b, sc);
      }
      for (int64_t l = 0; l < p.local_blocks; ++l)
        block_score[std::max<int64_t>(0, num_blocks - 1 - l)] = kPosInf;
      const int64_t keep = std::min(p.topk_blocks, num_blocks);
      order.resize(num_blocks);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                        [&](int64_t a, int64_t b) {
                          if (block_score[a] != block_score[b])
                            return block_score[a] > block_score[b];
                          return a < b;
                        });
      int32_t* o = selected + (h * rows + r) * p.topk_blocks;
      for (int64_t i = 0; i < p.topk_blocks; ++i)
        o[i] = i < keep && block_score[order[i]] != kNegInf ? static_cast<int32_t>(order[i]) : -1;
    }
  });
}

}  // namespace m3::kernels::cpu
