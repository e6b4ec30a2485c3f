// Paged attention: one (row, head) at a time over key ranges split at page boundaries, through
// AttendRanges' arithmetic (AttendRangesOf with keys looked up by page; FP8 pages dequantized
// key by key as they are looked up).
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

// One KV group of FP8 pages: each key and value dequantized (code * scale) into the thread's
// scratch when looked up; AttendRangesOf reads a key's row before it looks up the next.
struct PagedHeadFp8 {
  const uint8_t* k;  // k_codes + group * head_dim
  const uint8_t* v;
  const float* k_scale;  // k_scales + group
  const float* v_scale;
  const int32_t* pages;
  int64_t page_size;
  int64_t heads;  // kv_heads
  int64_t dim;
  float* k_row;  // [dim] scratch
  float* v_row;
  const float* Key(int64_t j) const {
    const int64_t s = Slot(j);
    DequantizeKvVectorFp8(k + s * heads * dim, k_scale[s * heads], dim, k_row);
    return k_row;
  }
  const float* Value(int64_t j) const {
    const int64_t s = Slot(j);
    DequantizeKvVectorFp8(v + s * heads * dim, v_scale[s * heads], dim, v_row);
    return v_row;
  }
  int64_t Slot(int64_t j) const {
    return int64_t{pages[j / page_size]} * page_size + j % page_size;
  }
};

// Float pages: a group's head is its rows at a stride.
struct FloatPages {
  const float* k;
  const float* v;
  PagedHead Head(int64_t g, const int32_t* pages, int64_t page_size, const AttentionDims& dims,
                 std::vector<float>&) const {
    const int64_t d = dims.head_dim;
    return {k + g * d, v + g * d, pages, page_size, dims.num_kv_heads * d};
  }
};

struct Fp8Pages {
  Fp8KvPages kv;
  PagedHeadFp8 Head(int64_t g, const int32_t* pages, int64_t page_size, const AttentionDims& dims,
                    std::vector<float>& scratch) const {
    const int64_t d = dims.head_dim, hkv = dims.num_kv_heads;
    scratch.resize(static_cast<size_t>(2 * d));
    return {kv.k_codes + g * d,
            kv.v_codes + g * d,
            kv.k_scales + g,
            kv.v_scales + g,
            pages,
            page_size,
            hkv,
            d,
            scratch.data(),
            scratch.data() + d};
  }
};

// Runs fn(row, head, seq, position, head's keys and values) for every (row, q head), in
// parallel.
template <typename Pages, typename Fn>
void ForEachRowHead(const Pages& kv_pages, const PagedLayout& layout, const AttentionDims& dims,
                    Fn&& fn) {
  const int64_t hq = dims.num_q_heads, hkv = dims.num_kv_heads;
  const int64_t group = hq / hkv;
  ParallelFor(layout.rows() * hq, 8, [&](int64_t begin, int64_t end) {
    Ranges ranges;
    std::vector<float> scores, scratch;
    for (int64_t idx = begin; idx < end; ++idx) {
      const int64_t r = idx / hq, h = idx % hq, g = h / group;
      const int64_t s = layout.SeqOf(r);
      const auto kv = kv_pages.Head(g, layout.Pages(s), layout.page_size, dims, scratch);
      fn(r, h, g, layout.PositionOf(s, r), kv, ranges, scores);
    }
  });
}

template <typename Pages>
void Dense(const float* q, const Pages& pages, const PagedLayout& layout, const AttentionDims& dims,
           float* out) {
  const int64_t hq = dims.num_q_heads, d = dims.head_dim;
  ForEachRowHead(pages, layout, dims,
                 [&](int64_t r, int64_t h, int64_t, int64_t pos, const auto& kv, Ranges& ranges,
                     std::vector<float>& scores) {
                   ranges.assign(1, {0, pos + 1});
                   AttendRangesOf(q + (r * hq + h) * d, kv, d, dims.scale, ranges, scores,
                                  out + (r * hq + h) * d);
                 });
}

template <typename Pages>
void BlockSparse(const float* q, const Pages& pages, const PagedLayout& layout,
                 const AttentionDims& dims, const int32_t* selected, int64_t topk,
                 int64_t block_size, float* out) {
  const int64_t hq = dims.num_q_heads, d = dims.head_dim, rows = layout.rows();
  ForEachRowHead(pages, layout, dims,
                 [&](int64_t r, int64_t h, int64_t g, int64_t pos, const auto& kv, Ranges& ranges,
                     std::vector<float>& scores) {
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

}  // namespace

void PagedAttention(const float* q, const float* k_pages, const float* v_pages,
                    const PagedLayout& layout, const AttentionDims& dims, float* out) {
  Dense(q, FloatPages{k_pages, v_pages}, layout, dims, out);
}

void PagedBlockSparseAttention(const float* q, const float* k_pages, const float* v_pages,
                               const PagedLayout& layout, const AttentionDims& dims,
                               const int32_t* selected, int64_t topk, int64_t block_size,
                               float* out) {
  BlockSparse(q, FloatPages{k_pages, v_pages}, layout, dims, selected, topk, block_size, out);
}

void PagedAttention(const float* q, const Fp8KvPages& kv, const PagedLayout& layout,
                    const AttentionDims& dims, float* out) {
  Dense(q, Fp8Pages{kv}, layout, dims, out);
}

void PagedBlockSparseAttention(const float* q, const Fp8KvPages& kv, const PagedLayout& layout,
                               const AttentionDims& dims, const int32_t* selected, int64_t topk,
                               int64_t block_size, float* out) {
  BlockSparse(q, Fp8Pages{kv}, layout, dims, selected, topk, block_size, out);
}

}  // namespace m3::kernels::cpu
