// MXFP8 and NVFP4 weights (engine/backend/linear_weight.h's layout) dequantized to bf16 on the
// GPU, for a device that holds a format dense: the values of kernels/cpu/microscaling.h's
// Dequantize*Row (the CPU twin), rounded to nearest even bf16.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

// codes [rows, K] e4m3, scales [rows, K / 32] e8m0 -> out [rows, K].
void DequantizeMxfp8ToBf16(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t K,
                           bf16* out, cudaStream_t stream);
// packed [rows, K / 2] e2m1 (even element in the low nibble), scales [rows, K / 16] e4m3,
// row_scale [rows] -> out [rows, K].
void DequantizeNvfp4ToBf16(const uint8_t* packed, const uint8_t* scales, const float* row_scale,
                           int64_t rows, int64_t K, bf16* out, cudaStream_t stream);

}  // namespace m3::kernels::cuda
