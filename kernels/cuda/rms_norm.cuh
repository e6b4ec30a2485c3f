// Fused residual add + Gemma RMSNorm on the GPU, the twin of kernels/cpu/rms_norm.h: residual
// (+= delta, rounded to bf16 as the bf16 model stores it), then out = x / rms(x) * (1 + w) in
// f32 from the stored residual. One block per row.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

void AddRmsNormGemma(bf16* residual, const bf16* delta, int64_t rows, int64_t dim, const float* w,
                     float eps, bf16* out, cudaStream_t stream);

}  // namespace m3::kernels::cuda
