// GELU, exact (erf) form: 0.5 * x * (1 + erf(x / sqrt(2))).
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

void GeluErf(float* x, int64_t n);  // in place

}  // namespace m3::kernels::cpu
