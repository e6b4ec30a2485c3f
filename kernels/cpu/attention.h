// Scaled dot-product attention on the CPU, GQA-aware, in float32:
//   out[q, h] = softmax_j(scale * q[q, h] . k[j, h / group]) . v[j, h / group]
// over the keys the mask allows. Layouts: q/out [Tq, Hq, D], k/v [Tk, Hkv, D] (row-major).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace m3::kernels::cpu {

struct AttentionDims {
  int64_t num_q_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  float scale = 1.0f;
};

// Dense attention. causal: query i (at absolute position q_pos[i]) sees keys j <= q_pos[i];
// otherwise every key (q_pos may be null).
void Attention(const float* q, int64_t tq, const float* k, const float* v, int64_t tk,
               const AttentionDims& dims, bool causal, const int64_t* q_pos, float* out);

// One (query, head) row over the keys in `ranges` ([begin, end) in increasing order). Keys are
// rows of k/v with stride kv_stride floats. Used by the dense and block-sparse variants.
void AttendRanges(const float* q, const float* k, const float* v, int64_t kv_stride,
                  int64_t head_dim, float scale,
                  const std::vector<std::pair<int64_t, int64_t>>& ranges, float* out);

// AttendRanges over keys wherever they are: kv.Key(j) and kv.Value(j) give key j's rows (the
// paged kernels look them up through a block table). One definition of the arithmetic, so the
// paged kernels equal the contiguous ones bit for bit. `scores` is scratch.
template <class KeyValues>
void AttendRangesOf(const float* q, const KeyValues& kv, int64_t head_dim, float scale,
                    const std::vector<std::pair<int64_t, int64_t>>& ranges,
                    std::vector<float>& scores, float* out) {
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

}  // namespace m3::kernels::cpu
