// Attention: a numerically stable softmax per (query, head), parallel over rows.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/parallel_for.h"

namespace m3::kernels::cpu {

void AttendRanges(const float* q, const float* k, const float* v, int64_t kv_stride,
                  int64_t head_dim, float scale,
                  const std::vector<std::pair<int64_t, int64_t>>& ranges, float* out) {
  std::vector<float> scores;
  float max_score = -std::numeric_limits<float>::infinity();
  for (auto [b, e] : ranges) {
    for (int64_t j = b; j < e; ++j) {
      const float* kj = k + j * kv_stride;
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
  float inv = static_cast<float>(1.0 / sum);
  size_t idx = 0;
  for (auto [b, e] : ranges) {
    for (int64_t j = b; j < e; ++j) {
      float p = scores[idx++] * inv;
      const float* vj = v + j * kv_stride;
      for (int64_t d = 0; d < head_dim; ++d) out[d] += p * vj[d];
    }
  }
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
