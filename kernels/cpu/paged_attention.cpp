// Paged attention: one (row, head) at a time over key ranges split at page boundaries, with the
// scores, softmax and accumulation in the order AttendRanges uses.
#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/parallel_for.h"

namespace m3::kernels::cpu {
namespace {

// Key ranges [begin, end) of one sequence (positions), in increasing order.
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

struct PagedHead {
  const float* k;  // k_pages + group * head_dim
  const float* v;
  const int32_t* pages;
  int64_t page_size;
  int64_t token_stride;  // kv_heads * head_dim
  const float* Key(int64_t j) const { return k + Offset(j); }
  const float* Value(int64_t j) const { return v + Offset(j); }
  int64_t Offset(int64_t j) const {
    return (int64_t{pages[j / page_size]} * page_size + j % page_size) * token_stride;
  }
};

void AttendPaged(const float* q, const PagedHead& kv, int64_t head_dim, float scale,
                 const Ranges& ranges, std::vector<float>& scores, float* out) {
  scores.clear();
  float max_score = -std::numeric_limits<float>::infinity();
  for (auto [b, e] : ranges) {
    for (int64_t j = b; j < e; ++j) {
      const float* kj = kv.Key(j);
      float s = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) s += q[d] * kj[d];
      s *= scale;
      scores.push_back(s);
      max_score = std::max(max_score, s);
    }
  }
  std::fill(out, out + head_dim, 0.0f);
  if (scores.empty()) return;
  double sum = 0.0;
  for (float& s : scores) {
    s = std::exp(s - max_score);
    sum += s;
  }
  const float inv = static_cast<float>(1.0 / sum);
  size_t idx = 0;
  for (auto [b, e] : ranges) {
    for (int64_t j = b; j < e; ++j) {
      const float p = scores[idx++] * inv;
      const float* vj = kv.Value(j);
      for (int64_t d = 0; d < head_dim; ++d) out[d] += p * vj[d];
    }
  }
}

// Runs fn(row, head, seq, position, PagedHead) for every (row, q head), in parallel.
template <typename Fn>
void ForEachRowHead(const float* k_pages, const float* v_pages, const PagedLayout& layout,
                    const AttentionDims& dims, Fn&& fn) {
  const int64_t hq = dims.num_q_heads, hkv = dims.num_kv_heads, d = dims.head_dim;
  const int64_t group = hq / hkv;
  ParallelFor(layout.rows() * hq, 8, [&](int64_t begin, int64_t end) {
    Ranges ranges;
    std::vector<float> scores;
    for (int64_t idx = begin; idx < end; ++idx) {
      const int64_t r = idx / hq, h = idx % hq, g = h / group;
      const int64_t s = layout.SeqOf(r);
      PagedHead kv{k_pages + g * d, v_pages + g * d, layout.Pages(s), layout.page_size, hkv * d};
      fn(r, h, g, layout.PositionOf(s, r), kv, ranges, scores);
    }
  });
}

}  // namespace

void PagedAttention(const float* q, const float* k_pages, const float* v_pages,
                    const PagedLayout& layout, const AttentionDims& dims, float* out) {
  const int64_t hq = dims.num_q_heads, d = dims.head_dim;
  ForEachRowHead(k_pages, v_pages, layout, dims,
                 [&](int64_t r, int64_t h, int64_t, int64_t pos, const PagedHead& kv,
                     Ranges& ranges, std::vector<float>& scores) {
                   ranges.assign(1, {0, pos + 1});
                   AttendPaged(q + (r * hq + h) * d, kv, d, dims.scale, ranges, scores,
                               out + (r * hq + h) * d);
                 });
}

void PagedBlockSparseAttention(const float* q, const float* k_pages, const float* v_pages,
                               const PagedLayout& layout, const AttentionDims& dims,
                               const int32_t* selected, int64_t topk, int64_t block_size,
                               float* out) {
  const int64_t hq = dims.num_q_heads, d = dims.head_dim, rows = layout.rows();
  ForEachRowHead(k_pages, v_pages, layout, dims,
                 [&](int64_t r, int64_t h, int64_t g, int64_t pos, const PagedHead& kv,
                     Ranges& ranges, std::vector<float>& scores) {
                   const int32_t* sel = selected + (g * rows + r) * topk;
                   std::vector<int64_t> blocks;
                   blocks.reserve(topk);
                   for (int64_t i = 0; i < topk; ++i)
                     if (sel[i] >= 0) blocks.push_back(sel[i]);
                   std::sort(blocks.begin(), blocks.end());
                   blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
                   ranges.clear();
                   for (int64_t b : blocks) {
                     const int64_t kb = b * block_size, ke = std::min(pos + 1, kb + block_size);
                     if (kb < ke) ranges.emplace_back(kb, ke);
                   }
                   AttendPaged(q + (r * hq + h) * d, kv, d, dims.scale, ranges, scores,
                               out + (r * hq + h) * d);
                 });
}

}  // namespace m3::kernels::cpu
