// LayerNorm: statistics in double, normalization in float.
#include "kernels/cpu/layer_norm.h"

#include <cmath>

namespace m3::kernels::cpu {

void LayerNorm(const float* x, int64_t rows, int64_t dim, const float* w, const float* b, float eps,
               float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double mean = 0.0;
    for (int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= double(dim);
    double var = 0.0;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= double(dim);
    float inv = static_cast<float>(1.0 / std::sqrt(var + double(eps)));
    float m = static_cast<float>(mean);
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] - m) * inv * w[i] + b[i];
  }
}

}  // namespace m3::kernels::cpu
