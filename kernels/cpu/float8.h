// Scalar codecs of the 8-bit and 4-bit float formats quantized checkpoints and caches use:
//  - e4m3 (OCP FP8, "F8_E4M3"): bias 7, max 448, no infinities, 0x7f / 0xff NaN; the encoder
//    rounds to nearest even and saturates to +-448 as the GPU's cvt.rn.satfinite does;
//  - e8m0 (the microscaling block scale): a biased exponent alone, 2^(code - 127), 0xff NaN;
//  - e2m1 (FP4 of NVFP4 / MXFP4): sign << 3 | index into {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

uint8_t F32ToE4M3(float x);
float E4M3ToF32(uint8_t code);

float E8M0ToF32(uint8_t code);

float E2M1ToF32(uint8_t nibble);  // the low 4 bits
uint8_t F32ToE2M1(float x);       // nearest, ties to the even code, saturating at +-6

}  // namespace m3::kernels::cpu
