// Gemma-style RMSNorm: y = x * rsqrt(mean(x^2) + eps) * (1 + w), in float32, row by row.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

// x and y are [rows, dim] (may alias); w is [dim].
void RmsNormGemma(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y);

}  // namespace m3::kernels::cpu
