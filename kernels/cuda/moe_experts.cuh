// Grouped MoE experts on the GPU, the twin of kernels/cpu/moe_experts.h: token permutation by
// expert, each expert's gate_up GEMM, SwiGLU-OAI, down GEMM (cuBLAS, or the GEMV kernels of
// moe_expert_gemv.cuh for decode-sized batches; f32 accumulation, expert outputs kept in f32),
// and the weighted un-permutation
// out[r] = scale * sum_j weights[r, j] * y_{ids[r, j]}(x[r]) + out[r], summed in expert order.
// gate_up [E, 2I, H], down [E, H, I] bf16; x / out [rows, H] bf16; ids i32 [rows, k] (device),
// each in [0, E) or negative: a pick of an expert another rank holds, which adds nothing.
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/block_scaled_mma.cuh"
#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

struct MoeExpertsDims {
  int64_t experts = 0;
  int64_t inter = 0;
  int64_t hidden = 0;
  int64_t topk = 0;  // at most 32
  float alpha = 1.702f;
  float limit = 7.0f;
  float scale = 1.0f;
};

// Device memory a caller lends the decode-sized paths, so a recorded decode step allocates
// nothing; without it (or too small) they allocate stream-ordered scratch.
struct MoeWorkspace {
  void* data = nullptr;
  size_t bytes = 0;
};
// The workspace a batch of `rows` rows uses (0: it takes the host-synchronized path, which
// allocates its own).
size_t MoeExpertsWorkspaceBytes(int64_t rows, const MoeExpertsDims& dims);

// Decode-sized batches (up to kMoeGemvMaxPicks = 512 picks, rows * topk) run without a host
// synchronization; larger ones synchronize the stream once (the expert group sizes decide the
// GEMMs). The handle must be bound to `stream`.
void MoeGroupedExperts(cublasHandle_t handle, const bf16* x, int64_t rows, const int32_t* ids,
                       const void* weights, ElemType weights_t, const bf16* gate_up,
                       const bf16* down, const MoeExpertsDims& dims, bf16* out, cudaStream_t stream,
                       const MoeWorkspace& workspace = {});

// The same with block-scaled expert weights (block_scaled_mma.cuh: gate_up rows [E * 2I, H],
// down rows [E * H, I], each MXFP8, NVFP4 or bf16). Batches up to kMoeGemvScaledMaxPicks (2048)
// picks run the block-scaled expert GEMVs (moe_expert_gemv.cuh), which read
// only the selected experts' quantized bytes, with no host synchronization; larger ones
// dequantize the experts in chunks of at most kMoeDequantChunkBytes of bf16 into stream-ordered
// scratch and run each chunk's picks through the bf16 paths above (the output is rounded to bf16
// once per chunk that holds picks).
constexpr size_t kMoeDequantChunkBytes = size_t{1} << 30;
size_t MoeExpertsScaledWorkspaceBytes(int64_t rows, const MoeExpertsDims& dims, WeightKind gate_up,
                                      WeightKind down);
void MoeGroupedExpertsScaled(cublasHandle_t handle, const bf16* x, int64_t rows, const int32_t* ids,
                             const void* weights, ElemType weights_t, const ScaledRows& gate_up,
                             const ScaledRows& down, const MoeExpertsDims& dims, bf16* out,
                             cudaStream_t stream, const MoeWorkspace& workspace = {});

// How many grouped GEMM calls this process ran as per-expert loops instead (cuBLAS refused the
// grouped call), for benchmarks to report which path they measured.
int64_t MoeGroupedGemmFallbacks();

}  // namespace m3::kernels::cuda
