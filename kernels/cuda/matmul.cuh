// Linear on the GPU, the twin of kernels/cpu/matmul.h: y[m, n] = x[m, k] . w[n, k]^T (+ bias[n])
// with bf16 x and w, f32 accumulation (cuBLAS, CUBLAS_COMPUTE_32F) and y in bf16 or f32.
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

// The handle's stream is the one the product runs on. Throws on a cuBLAS error.
void Linear(cublasHandle_t handle, const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n,
            const float* bias, void* y, ElemType yt, cudaStream_t stream);

}  // namespace m3::kernels::cuda
