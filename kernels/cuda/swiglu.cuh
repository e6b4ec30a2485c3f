// SwiGLU-OAI on the GPU, the twin of kernels/cpu/swiglu.h: gate_up rows [gate (inter) | up
// (inter)] -> out [rows, inter] = (clamp(up) + 1) * g * sigmoid(alpha g), g = min(gate, limit).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

void SwigluOai(const bf16* gate_up, int64_t rows, int64_t inter, float alpha, float limit,
               bf16* out, cudaStream_t stream);

}  // namespace m3::kernels::cuda
