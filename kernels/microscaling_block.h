// The per-block arithmetic of the MXFP8 and NVFP4 rules (kernels/cpu/microscaling.h), one
// definition for host and device, for the code that quantizes on the GPU and its CPU twin
// (kernels/cpu/random_fill.h): the MXFP8 block exponent computed exactly from the float's bits
// (ceil(log2(amax / 448)); microscaling.h's float log2 can round a value a few ulps above a
// power of two down to it, one exponent lower, which saturates that block's largest code: both
// are valid MXFP8), powers of two, the e4m3 decoder and the e2m1 encoder (nearest, ties to the
// even code, saturating at 6). The e4m3 encoder is the platform's: F32ToE4M3 on the host, the
// GPU's cvt.rn.satfinite on the device (the CUDA tests hold them equal).
#pragma once

#include <cstdint>

#include "kernels/counter_normal.h"

namespace m3::kernels {

inline constexpr float kE4M3MaxValue = 448.0f;
inline constexpr float kE2M1MaxValue = 6.0f;

// 2^e as a float, e in [-149, 127] (subnormal below -126).
M3_HOST_DEVICE inline float Pow2(int e) {
  return e >= -126 ? counter_normal::FromBits(static_cast<uint32_t>(e + 127) << 23)
                   : counter_normal::FromBits(1u << (e + 149));
}

// ceil(log2(x)) for a finite x > 0, exactly.
M3_HOST_DEVICE inline int CeilLog2(float x) {
  const uint32_t u = counter_normal::Bits(x);
  const int biased = static_cast<int>((u >> 23) & 0xff);
  uint32_t mant = u & 0x7fffffu;
  if (biased > 0) return biased - 127 + (mant != 0 ? 1 : 0);
  // Subnormal: x = mant 2^-149; the position of its highest bit, +1 unless it is alone.
  int top = 22;
  while (!(mant >> top)) --top;
  return top - 149 + ((mant & ((1u << top) - 1)) != 0 ? 1 : 0);
}

// The MXFP8 block exponent of a block whose largest magnitude is amax: clamp(ceil(log2(amax /
// 448)), -127, 127), -127 for an all-zero block. The scale byte is e + 127.
M3_HOST_DEVICE inline int Mxfp8BlockExponent(float amax) {
  if (!(amax > 0.0f)) return -127;
  const int e = CeilLog2(counter_normal::Div(amax, kE4M3MaxValue));
  return e < -127 ? -127 : (e > 127 ? 127 : e);
}

M3_HOST_DEVICE inline float E4M3Decode(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const float mag = e == 0 ? counter_normal::Mul(static_cast<float>(m), 0x1.0p-9f)
                           : counter_normal::FromBits(static_cast<uint32_t>(e + 120) << 23 |
                                                      static_cast<uint32_t>(m) << 20);
  return (code & 0x80) ? -mag : mag;
}

// e2m1 of x: the nearest of {0, 0.5, 1, 1.5, 2, 3, 4, 6} (ties to the even code), signed.
M3_HOST_DEVICE inline uint8_t E2M1Encode(float x) {
  const uint8_t sign = (counter_normal::Bits(x) >> 31) ? 8 : 0;
  const float a = x < 0.0f ? -x : x;
  uint8_t c = a <= 0.25f   ? 0
              : a < 0.75f  ? 1
              : a <= 1.25f ? 2
              : a < 1.75f  ? 3
              : a <= 2.5f  ? 4
              : a < 3.5f   ? 5
              : a <= 5.0f  ? 6
                           : 7;
  return sign | c;
}

}  // namespace m3::kernels
