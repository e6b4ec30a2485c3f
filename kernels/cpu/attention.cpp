// Attention: a numerically stable softmax per (query, head), parallel over rows.
#include "kernels/cpu/attention.h"

#include <algorithm>

#include "kernels/cpu/parallel_for.h"

namespace m3::kernels::cpu {

namespace {

// Key j's rows at j * stride.
struct ContiguousRows {
  const float* k;
  const float* v;
  int64_t stride;
  const float* Key(int64_t j) const { return k + j * stride; }
  const float* Value(int64_t j) const { return v + j * stride; }
};

}  // namespace

void AttendRanges(const float* q, const float* k, const float* v, int64_t kv_stride,
                  int64_t head_dim, float scale,
                  const std::vector<std::pair<int64_t, int64_t>>& ranges, float* out) {
  std::vector<float> scores;
  AttendRangesOf(q, ContiguousRows{k, v, kv_stride}, head_dim, scale, ranges, scores, out);
}

void Attention(const float* q, int64_t tq, const float* k, const float* v, int64_t tk,
               const AttentionDims& dims, bool causal, const int64_t* q_pos, float* out) {
  const int64_t hq = dims.num_q_heads, hkv = dims.num_kv_heads, d = dims.head_dim;
  const int64_t group = hq / hkv;
  ParallelFor(tq * hq, 8, [&](int64_t begin, int64_t end) {
    std::vector<std::pair<int64_t, int64_t>> ranges(1);
    for (int64_t row = begin; row < end; ++row) {
      int64_t i = row / hq, h = row % hq, g = h / group;
      ranges[0] = {0, causal ? std::min(tk, q_pos[i] + 1) : tk};
      AttendRanges(q + (i * hq + h) * d, k + g * d, v + g * d, hkv * d, d, dims.scale, ranges,
                   out + (i * hq + h) * d);
    }
  });
}

}  // namespace m3::kernels::cpu
