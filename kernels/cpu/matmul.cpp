// Linear on CBLAS or on the ParallelFor fallback (row-by-row dot products: both operands are
// contiguous along k in the nn.Linear layout).
#include "kernels/cpu/matmul.h"

#include <algorithm>

#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/small_m_gemm.h"
#include "kernels/cpu/small_m_linear.h"

#ifdef M3_HAVE_CBLAS
#include <cblas.h>
#endif

namespace m3::kernels::cpu {

bool LinearUsesBlas() {
#ifdef M3_HAVE_CBLAS
  return true;
#else
  return false;
#endif
}

void Linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
            float* y) {
  if (m == 0 || n == 0) return;
  if (m <= kSmallLinearRows && SmallMKernelsEnabled() && SmallMLinear(x, m, k, w, n, bias, y))
    return;
#ifdef M3_HAVE_CBLAS
  if (bias) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = bias[j];
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), w, static_cast<int>(k),
              bias ? 1.0f : 0.0f, y, static_cast<int>(n));
#else
  // Parallel over output elements in row-major order; each is one contiguous dot product.
  ParallelFor(m * n, 256, [&](int64_t begin, int64_t end) {
    for (int64_t idx = begin; idx < end; ++idx) {
      int64_t i = idx / n, j = idx % n;
      const float* a = x + i * k;
      const float* b = w + j * k;
      float acc = 0.0f;
      for (int64_t t = 0; t < k; ++t) acc += a[t] * b[t];
      y[idx] = bias ? acc + bias[j] : acc;
    }
  });
#endif
}

void LinearKMajor(const float* x, int64_t m, int64_t k, const float* wt, int64_t n, float* y) {
  if (m == 0 || n == 0) return;
#ifdef M3_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), wt, static_cast<int>(n), 0.0f, y,
              static_cast<int>(n));
#else
  constexpr int64_t kTile = 64;
  ParallelFor((n + kTile - 1) / kTile, 1, [&](int64_t b, int64_t e) {
    const int64_t c0 = b * kTile;
    SmallMGemmKMajor(x, m, k, k, wt + c0, n, std::min(n, e * kTile) - c0, y + c0, n);
  });
#endif
}

}  // namespace m3::kernels::cpu
