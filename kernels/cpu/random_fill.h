// Dummy weights (--load-format dummy) on the host, the CPU twin of kernels/cuda/random_fill.cuh
// and bitwise its numbers: element i of a tensor drawn with `seed` is normal(mean, std) from
// kernels/counter_normal.h's stream, i the row-major index of the (dequantized) element. The
// block-scaled Linears are those normals (mean 0) quantized by microscaling.h's rules
// (kernels/microscaling_block.h); NVFP4's global scale is fixed from std (the amax taken as 8
// std, beyond the stream's 7.4 sigma reach), so no pass over the tensor is needed first.
// Dequantized, MXFP8 keeps std within 0.1%, NVFP4 within a few % (random_fill_test).
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

// out[i] = mean + std * z(begin + i), i in [0, n).
void RandomNormal(uint64_t seed, float mean, float std, int64_t begin, int64_t n, float* out);

// weight_scale_2 of an NVFP4 dummy of spread std: 8 std / (6 * 448).
float DummyNvfp4GlobalScale(float std);

// Rows [row_begin, row_begin + rows) of a dummy [N, K] Linear of spread std (K a multiple of
// the block): MXFP8 codes [rows, K] and e8m0 scales [rows, K / 32]; NVFP4 packed codes
// [rows, K / 2] and e4m3 scales [rows, K / 16] with `global` (DummyNvfp4GlobalScale(std)).
void RandomMxfp8Rows(uint64_t seed, float std, int64_t K, int64_t row_begin, int64_t rows,
                     uint8_t* codes, uint8_t* scales);
void RandomNvfp4Rows(uint64_t seed, float std, float global, int64_t K, int64_t row_begin,
                     int64_t rows, uint8_t* packed, uint8_t* scales);

}  // namespace m3::kernels::cpu
