// Gemma-style RMSNorm: y = x * rsqrt(mean(x^2) + eps) * (1 + w), in float32, row by row.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

// x and y are [rows, dim] (may alias); w is [dim].
void RmsNormGemma(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y);

// The fused residual step of a decoder layer: residual += delta (when delta is not null), then
// out = RmsNormGemma(residual). Rows in parallel; out must not alias residual.
void AddRmsNormGemma(float* residual, const float* delta, int64_t rows, int64_t dim, const float* w,
                     float eps, float* out);

}  // namespace m3::kernels::cpu
