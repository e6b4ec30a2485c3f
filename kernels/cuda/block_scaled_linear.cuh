// Linear with block-scaled weights on the GPU, the twin of kernels/cpu/block_scaled_linear.h:
// y[m, n] = x[m, k] . W[n, k]^T (+ bias[n]) with W in MXFP8 or NVFP4 (block_scaled_mma.cuh),
// bf16 x, y in bf16 or f32, f32 accumulation. Decode-sized batches run BlockScaledGemv
// (weights read once per 64 rows, dequantized in registers; up to 128 rows MXFP8, 256 NVFP4);
// larger ones dequantize chunks of W's rows to bf16 in the workspace and multiply each with
// cuBLAS (tensor-core bf16 GEMM).
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/block_scaled_mma.cuh"

namespace m3::kernels::cuda {

// Workspace a product of m rows needs (bounded: the prefill path dequantizes at most
// kBlockScaledChunkBytes of bf16 weights at a time).
constexpr size_t kBlockScaledChunkBytes = size_t{96} << 20;
size_t BlockScaledLinearWorkspaceBytes(int64_t m, int64_t n, int64_t k, WeightKind kind);

// The handle must be bound to `stream`. workspace: at least BlockScaledLinearWorkspaceBytes.
// Decode-sized batches neither allocate nor synchronize with the host (graph-capturable).
void BlockScaledLinear(cublasHandle_t handle, const bf16* x, int64_t m, const ScaledRows& w,
                       int64_t n, int64_t k, const float* bias, void* y, ElemType yt,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace m3::kernels::cuda
