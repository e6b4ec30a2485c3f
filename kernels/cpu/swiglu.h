// SwiGLU-OAI, the gated activation of MiniMax-M3 MLPs and experts:
//   g = min(gate, limit); u = clamp(up, -limit, limit); out = (u + 1) * g * sigmoid(alpha * g).
// The gate is clamped from above only.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

// gate and up: [rows, inter] with row stride in_stride (e.g. two halves of one gate_up row);
// out: dense [rows, inter].
void SwigluOai(const float* gate, const float* up, int64_t rows, int64_t inter, int64_t in_stride,
               float alpha, float limit, float* out);

}  // namespace m3::kernels::cpu
