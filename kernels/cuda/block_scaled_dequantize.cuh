// Block-scaled weight rows (MXFP8, NVFP4) dequantized to bf16 on the GPU, the twin of
// kernels/cpu/microscaling.h's Dequantize*Row: what the prefill GEMMs (cuBLAS on bf16) and the
// large-batch MoE experts read. MXFP8 values are exact in bf16; NVFP4 values times their f32
// row scale are rounded to bf16 (nearest even), or, without the row scale, exact (an e2m1 value
// times an e4m3 scale has at most 6 significant bits).
#pragma once

#include <cstdint>

#include "kernels/cuda/block_scaled_mma.cuh"

namespace m3::kernels::cuda {

// out [rows, k] bf16 = rows [row0, row0 + rows) of w (k a multiple of 32); w.kind quantized.
// row_scaled false: NVFP4 rows without their f32 row scale (the caller applies it).
void DequantizeScaledRows(const ScaledRows& w, int64_t row0, int64_t rows, int64_t k, bf16* out,
                          cudaStream_t stream, bool row_scaled = true);

}  // namespace m3::kernels::cuda
