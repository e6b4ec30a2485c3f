// Linear with block-scaled weights on the host, the reference the GPU's block-scaled products
// (kernels/cuda/block_scaled_linear.cuh, block_scaled_gemv.cuh) are tested against:
// y[m, n] = x[m, k] . W[n, k]^T with W's rows dequantized as microscaling.h defines (MXFP8: e4m3
// codes [n, k] and e8m0 scales [n, k / 32]; NVFP4: packed e2m1 [n, k / 2], e4m3 scales
// [n, k / 16] and a float32 global scale per row), float32 throughout.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

enum class BlockScaledFormat { kMxfp8, kNvfp4 };

// W [n, k] as float32 (row_scale: NVFP4's per-row global scale, unused for MXFP8).
void DequantizeBlockScaled(BlockScaledFormat format, const uint8_t* codes, const uint8_t* scales,
                           const float* row_scale, int64_t n, int64_t k, float* w);

void BlockScaledLinear(const float* x, int64_t m, BlockScaledFormat format, const uint8_t* codes,
                       const uint8_t* scales, const float* row_scale, int64_t n, int64_t k,
                       float* y);

}  // namespace m3::kernels::cpu
