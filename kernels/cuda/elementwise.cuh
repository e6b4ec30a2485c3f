// Element and row movement on the GPU: float type conversion (weight upload, host float32 <->
// bf16 activations), x += delta, bias rows, and row gathers (embedding lookup, logits rows).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

// dst[i] = src[i] converted; dst_t is kF32 or kBF16 (round to nearest even).
void ConvertFloats(const void* src, ElemType src_t, void* dst, ElemType dst_t, int64_t n,
                   cudaStream_t stream);
// x[i] += delta[i], the sum rounded to bf16.
void AddInPlace(bf16* x, const bf16* delta, int64_t n, cudaStream_t stream);
// y[r, c] += bias[c] for y [rows, cols] of type yt (kF32 or kBF16).
void AddBias(void* y, ElemType yt, const float* bias, int64_t rows, int64_t cols,
             cudaStream_t stream);
// dst row i = src row index[i]; rows of row_bytes (a multiple of 2).
void GatherRows(const void* src, int64_t row_bytes, const int32_t* index, int64_t n, void* dst,
                cudaStream_t stream);

}  // namespace m3::kernels::cuda
