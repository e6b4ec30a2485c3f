// e4m3 encoding and decoding by the format's definition (bias 7, 3 mantissa bits, subnormals
// in steps of 2^-9, no infinities, 0x7f the NaN); e2m1 by its table; e8m0 as a power of two.
#include "kernels/cpu/float8.h"

#include <cmath>

namespace m3::kernels::cpu {

namespace {
constexpr float kE4M3Max = 448.0f;
constexpr float kE2M1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
}  // namespace

uint8_t F32ToE4M3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= kE4M3Max) return sign | 0x7e;  // saturate to the largest finite value
  // nearbyint rounds half to even in the default rounding mode, as the GPU's cvt.rn does.
  if (a < std::ldexp(1.0f, -6)) {
    // Subnormal range: steps of 2^-9; a result of 8 steps is the smallest normal (code 8).
    return sign | static_cast<uint8_t>(std::nearbyint(std::ldexp(a, 9)));
  }
  int e2 = 0;
  const float f = std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int e = e2 - 1;
  int m = static_cast<int>(std::nearbyint((std::ldexp(f, 1) - 1.0f) * 8.0f));
  if (m == 8) {
    m = 0;
    ++e;
  }
  const int biased = e + 7;
  if (biased > 15 || (biased == 15 && m == 7)) return sign | 0x7e;
  return sign | static_cast<uint8_t>((biased << 3) | m);
}

float E4M3ToF32(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::nanf("");
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                           : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return (code & 0x80) ? -mag : mag;
}

float E8M0ToF32(uint8_t code) {
  if (code == 0xff) return std::nanf("");
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

float E2M1ToF32(uint8_t nibble) {
  const float mag = kE2M1Values[nibble & 7];
  return (nibble & 8) ? -mag : mag;
}

uint8_t F32ToE2M1(float x) {
  const uint8_t sign = std::signbit(x) ? 8 : 0;
  const float a = std::fabs(x);
  if (std::isnan(x)) return sign | 7;
  // Nearest of the eight magnitudes; a tie goes to the even code (an even mantissa bit).
  uint8_t best = 0;
  for (uint8_t i = 1; i < 8; ++i) {
    const float d = std::fabs(a - kE2M1Values[i]), db = std::fabs(a - kE2M1Values[best]);
    if (d < db || (d == db && (i & 1) == 0)) best = i;
  }
  return sign | best;
}

}  // namespace m3::kernels::cpu
