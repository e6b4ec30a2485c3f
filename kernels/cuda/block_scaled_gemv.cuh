// Decode-sized products with block-scaled weights, the twin of kernels/cpu/block_scaled_linear.h:
// y[m, n] = (x[m, k] . W[n, k]^T) for m <= kBlockScaledGemvMaxRows input rows, W in MXFP8 or
// NVFP4 (block_scaled_mma.cuh): the weights streamed from HBM once per call, dequantized in
// registers, multiplied on the tensor cores with f32 accumulation; y in bf16 or f32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/block_scaled_mma.cuh"

namespace m3::kernels::cuda {

constexpr int64_t kBlockScaledGemvMaxRows = 64;

// Whether BlockScaledGemv takes this product: 1 <= m <= 64, k a multiple of 32, quantized
// weights.
bool BlockScaledGemvFits(int64_t m, int64_t k, WeightKind kind);

// Device scratch BlockScaledGemv uses (the split-K partial sums, at most 64 MiB; 0: none). The
// same (m, n, k, kind) always asks for the same bytes, so a decode step sized eagerly records.
size_t BlockScaledGemvWorkspaceBytes(int64_t m, int64_t n, int64_t k, WeightKind kind);

// x [m, k] bf16 (rows k apart), w [n, k], y [m, n] of type yt (kBF16 or kF32). workspace:
// at least BlockScaledGemvWorkspaceBytes (a smaller one: no K split, slower on few rows). No host
// synchronization, no allocation: a decode step with it can be recorded as a CUDA graph.
void BlockScaledGemv(const bf16* x, int64_t m, const ScaledRows& w, int64_t n, int64_t k, void* y,
                     ElemType yt, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace m3::kernels::cuda
