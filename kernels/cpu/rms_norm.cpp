// RmsNormGemma: mean of squares accumulated in double, scale applied in float.
#include "kernels/cpu/rms_norm.h"

#include <cmath>

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

}  // namespace m3::kernels::cpu
