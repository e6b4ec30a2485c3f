// The routed experts of a decode-sized batch as GEMVs that read each selected expert's weights
// once per step, whatever number of rows chose it, with no host synchronization (the launch
// configuration depends only on the number of picks, so a decode step can be recorded as a
// CUDA graph): the picks are grouped by expert on the device, then one kernel computes
// act = SwiGLU-OAI(x W_gate^T, x W_up^T) for every pick of a group (gate and up rows together,
// f32 accumulation, no bf16 round trip of gate_up) and another y = act W_down^T into f32 rows
// sorted by expert. The caller un-permutes y with slot_of_pick.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/block_scaled_mma.cuh"
#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

struct MoeGemvDims {
  int64_t experts = 0, hidden = 0, inter = 0, topk = 0;
  float alpha = 1.702f, limit = 7.0f;
};

// Whether MoeExpertGemv takes this batch: picks (rows * topk) up to kMoeGemvMaxPicks, hidden
// and inter multiples of 8 (16-byte rows), experts up to 1024.
constexpr int64_t kMoeGemvMaxPicks = 512;
bool MoeExpertGemvFits(int64_t picks, const MoeGemvDims& d);

// Device scratch MoeExpertGemv needs (one allocation, 256-byte aligned pieces).
size_t MoeExpertGemvScratchBytes(int64_t picks, const MoeGemvDims& d);

// x [rows, hidden] bf16, ids i32 [rows, topk] (in [0, experts); others clamped), gate_up
// [E, 2 inter, hidden], down [E, hidden, inter] bf16. Writes ys [picks, hidden] f32 (row s: the
// expert output of the pick in slot s) and slot_of_pick [picks].
void MoeExpertGemv(const bf16* x, int64_t rows, const int32_t* ids, const bf16* gate_up,
                   const bf16* down, const MoeGemvDims& d, void* scratch, float* ys,
                   int32_t* slot_of_pick, cudaStream_t stream);

// The same with block-scaled weights (block_scaled_mma.cuh: MXFP8, NVFP4, or bf16 for either):
// gate_up rows [E * 2 inter, hidden], down rows [E * hidden, inter]. Each selected expert's
// quantized bytes are read once per step, dequantized in registers and multiplied on the tensor
// cores (a block per 32 act columns (their gate and up rows together), or per 32 down rows, and
// group, its 8 warps splitting K, picks in passes of 8, later passes reading the expert's
// weights from L2). Takes: picks up
// to kMoeGemvScaledMaxPicks (beyond decode: a 512-token prefill chunk of top-4 still reads each
// expert's quantized bytes once from HBM, where dequantizing every expert to bf16 would write and
// read 4.5 bytes per weight), experts up to 1024, hidden and inter multiples of 32. Same scratch as
// MoeExpertGemv.
constexpr int64_t kMoeGemvScaledMaxPicks = 2048;
bool MoeExpertGemvScaledFits(int64_t picks, const MoeGemvDims& d);
void MoeExpertGemvScaled(const bf16* x, int64_t rows, const int32_t* ids, const ScaledRows& gate_up,
                         const ScaledRows& down, const MoeGemvDims& d, void* scratch, float* ys,
                         int32_t* slot_of_pick, cudaStream_t stream);

}  // namespace m3::kernels::cuda
