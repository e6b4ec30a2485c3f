// Scaled dot-product attention on the CPU, GQA-aware, in float32:
//   out[q, h] = softmax_j(scale * q[q, h] . k[j, h / group]) . v[j, h / group]
// over the keys the mask allows. Layouts: q/out [Tq, Hq, D], k/v [Tk, Hkv, D] (row-major).
#pragma once

#include <cstdint>
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

}  // namespace m3::kernels::cpu
