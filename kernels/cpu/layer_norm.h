// LayerNorm with affine weight and bias (biased variance), as torch.nn.LayerNorm.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

// x and y are [rows, dim] (may alias).
void LayerNorm(const float* x, int64_t rows, int64_t dim, const float* w, const float* b, float eps,
               float* y);

}  // namespace m3::kernels::cpu
