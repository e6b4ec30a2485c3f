// LayerNorm on the GPU, the twin of kernels/cpu/layer_norm.h: mean and variance in f32 (two
// passes), y = (x - mean) / sqrt(var + eps) * w + b. In place (x == y) is allowed.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

void LayerNorm(const bf16* x, int64_t rows, int64_t dim, const float* w, const float* b, float eps,
               bf16* y, cudaStream_t stream);

}  // namespace m3::kernels::cuda
