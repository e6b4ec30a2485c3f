// RmsNormGemma: mean of squares accumulated in double, scale applied in float.
#include "kernels/cpu/rms_norm.h"

#include <cmath>

#include "kernels/cpu/parallel_for.h"

namespace m3::kernels::cpu {

void RmsNormGemma(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += double(xr[i]) * double(xr[i]);
    float inv = static_cast<float>(1.0 / std::sqrt(ss / double(dim) + double(eps)));
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] * inv) * (1.0f + w[i]);
  }
}

void AddRmsNormGemma(float* residual, const float* delta, int64_t rows, int64_t dim, const float* w,
                     float eps, float* out) {
  ParallelFor(rows, 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* x = residual + r * dim;
      if (delta)
        for (int64_t i = 0; i < dim; ++i) x[i] += delta[r * dim + i];
      RmsNormGemma(x, 1, dim, w, eps, out + r * dim);
    }
  });
}

}  // namespace m3::kernels::cpu
