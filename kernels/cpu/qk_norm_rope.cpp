// QkNormRopeToPages: rows in parallel; each row normed and rotated head by head with the
// RmsNormGemma / ApplyRotaryHalf reference kernels, so the numbers equal the unfused path.
#include "kernels/cpu/qk_norm_rope.h"

#include <algorithm>

#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"

namespace m3::kernels::cpu {

void QkNormRopeToPages(const float* qkv, int64_t rows, const QkNormRopeDims& d,
                       const QkNormWeightsPtr& w, const float* cos, const float* sin,
                       const int64_t* slots, float* q_out, float* index_q_out, float* k_pages,
                       float* v_pages, float* index_k_pages) {
  const int64_t D = d.head_dim, qw = d.q_heads * D, kw = d.kv_heads * D;
  const int64_t iqw = d.index_heads * d.index_dim;
  const int64_t width = qw + 2 * kw + (d.index_heads > 0 ? iqw + d.index_dim : 0);
  ParallelFor(rows, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = qkv + r * width;
      const float* c = cos + r * d.rot;
      const float* s = sin + r * d.rot;
      const int64_t slot = slots[r], kv_at = d.kv_by_row ? r : slot;
      float* q = q_out + r * qw;
      RmsNormGemma(row, d.q_heads, D, w.q_norm, d.eps, q);
      ApplyRotaryHalf(q, d.q_heads, D, d.rot, c, s);
      float* k = k_pages + kv_at * kw;
      RmsNormGemma(row + qw, d.kv_heads, D, w.k_norm, d.eps, k);
      ApplyRotaryHalf(k, d.kv_heads, D, d.rot, c, s);
      std::copy_n(row + qw + kw, kw, v_pages + kv_at * kw);
      if (d.index_heads > 0) {
        const float* idx = row + qw + 2 * kw;
        float* iq = index_q_out + r * iqw;
        RmsNormGemma(idx, d.index_heads, d.index_dim, w.index_q_norm, d.eps, iq);
        ApplyRotaryHalf(iq, d.index_heads, d.index_dim, d.index_rot, c, s);
        float* ik = index_k_pages + (d.index_k_by_row ? r : slot) * d.index_dim;
        RmsNormGemma(idx + iqw, 1, d.index_dim, w.index_k_norm, d.eps, ik);
        ApplyRotaryHalf(ik, 1, d.index_dim, d.index_rot, c, s);
      }
    }
  });
}

}  // namespace m3::kernels::cpu
