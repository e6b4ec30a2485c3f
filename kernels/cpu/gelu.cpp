// GeluErf in double per element, stored as float.
#include "kernels/cpu/gelu.h"

#include <cmath>

namespace m3::kernels::cpu {

void GeluErf(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double v = x[i];
    x[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * M_SQRT1_2)));
  }
}

}  // namespace m3::kernels::cpu
