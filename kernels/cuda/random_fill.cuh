// Dummy weights (--load-format dummy) drawn in place on the GPU: a full-size model's ~130 GB per
// GPU in seconds, where drawing on the host and uploading would take minutes. Bitwise the
// numbers of the CPU twin kernels/cpu/random_fill.h (which says what they are).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

// out[i] = mean + std * z(i), i in [0, n), stored as t (kF32 or kBF16, rounded to nearest even).
void RandomNormalFill(uint64_t seed, float mean, float std, int64_t n, void* out, ElemType t,
                      cudaStream_t stream);

// Rows [first_row, first_row + rows) of a dummy [N, K] Linear of spread std: MXFP8 e4m3 codes
// [rows, K] + e8m0 scales [rows, K / 32]; NVFP4 packed e2m1 [rows, K / 2] + e4m3 scales
// [rows, K / 16] + row_scale [rows] = global (kernels::cpu::DummyNvfp4GlobalScale(std)). K a
// multiple of the block.
void RandomMxfp8Fill(uint64_t seed, float std, int64_t first_row, int64_t rows, int64_t K,
                     uint8_t* codes, uint8_t* scales, cudaStream_t stream);
void RandomNvfp4Fill(uint64_t seed, float std, float global, int64_t first_row, int64_t rows,
                     int64_t K, uint8_t* packed, uint8_t* scales, float* row_scale,
                     cudaStream_t stream);

}  // namespace m3::kernels::cuda
