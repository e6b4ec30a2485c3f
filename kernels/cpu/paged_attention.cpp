// Paged attention: one (row, head) at a time over key ranges split at page boundaries, through
// AttendRanges' arithmetic (AttendRangesOf with keys looked up by page).
#include "kernels/cpu/paged_attention.h"

#include <algorithm>

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
                   AttendRangesOf(q + (r * hq + h) * d, kv, d, dims.scale, ranges, scores,
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
                   AttendRangesOf(q + (r * hq + h) * d, kv, d, dims.scale, ranges, scores,
                                  out + (r * hq + h) * d);
                 });
}

}  // namespace m3::kernels::cpu
