// GELU (erf form) in place on the GPU, the twin of kernels/cpu/gelu.h; f32 math.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

void GeluErf(bf16* x, int64_t n, cudaStream_t stream);

}  // namespace m3::kernels::cuda
