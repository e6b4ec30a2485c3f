// SwigluOai element loop.
#include "kernels/cpu/swiglu.h"

#include <algorithm>
#include <cmath>

namespace m3::kernels::cpu {

void SwigluOai(const float* gate, const float* up, int64_t rows, int64_t inter, int64_t in_stride,
               float alpha, float limit, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inter; ++i) {
      float g = std::min(gate[r * in_stride + i], limit);
      float u = std::clamp(up[r * in_stride + i], -limit, limit);
      float sig = 1.0f / (1.0f + std::exp(-alpha * g));
      out[r * inter + i] = (u + 1.0f) * (g * sig);
    }
  }
}

}  // namespace m3::kernels::cpu
