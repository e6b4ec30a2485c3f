// CounterNormalPair: the standard normal draws dummy weights are made of, one definition for
// host and device so the CPU twin and the GPU fill give bitwise the same numbers. Pair p of
// stream `key` (NormalStreamKey(seed)) is two independent normals by Box-Muller from one Mix64
// of the counter (kernels/random_stream.h's mixer): u1 from 40 bits in (0, 1] (the tail is cut
// at 7.4 sigma), u2 from 24 bits. Bitwise equality needs every float operation rounded once in
// both compilers: log and cos/sin are polynomials here (libm's and CUDA's differ in the last
// bit), device code uses the _rn intrinsics (never fused into FMAs), and host translation units
// that include this build with -ffp-contract=off.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/random_stream.h"

namespace m3::kernels {

namespace counter_normal {

M3_HOST_DEVICE inline float Mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
M3_HOST_DEVICE inline float Add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
M3_HOST_DEVICE inline float Sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
M3_HOST_DEVICE inline float Div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
M3_HOST_DEVICE inline float Sqrt(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return __builtin_sqrtf(a);
#endif
}
M3_HOST_DEVICE inline uint32_t Bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}
M3_HOST_DEVICE inline float FromBits(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

// ln(x) for x in (0, 1]: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s),
// s = (m - 1) / (m + 1), |s| <= 0.172: the series to s^9 is within 4e-10 of it.
M3_HOST_DEVICE inline float LogUnit(float x) {
  const uint32_t u = Bits(x);
  int e = static_cast<int>((u >> 23) & 0xff) - 127;  // x >= 2^-40: never subnormal
  float m = FromBits((u & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = Mul(m, 0.5f);
    ++e;
  }
  const float s = Div(Sub(m, 1.0f), Add(m, 1.0f)), s2 = Mul(s, s);
  float p = 1.0f / 9.0f;
  p = Add(Mul(p, s2), 1.0f / 7.0f);
  p = Add(Mul(p, s2), 1.0f / 5.0f);
  p = Add(Mul(p, s2), 1.0f / 3.0f);
  p = Add(Mul(p, s2), 1.0f);
  const float ln_m = Mul(Mul(2.0f, s), p);
  return Add(Mul(static_cast<float>(e), 0.693147181f), ln_m);
}

// cos and sin of x in [0, pi/4] by their Taylor series (terms to x^10 / x^9: within 2e-10).
M3_HOST_DEVICE inline void CosSinEighth(float x, float& c, float& s) {
  const float x2 = Mul(x, x);
  float pc = -1.0f / 3628800.0f;
  pc = Add(Mul(pc, x2), 1.0f / 40320.0f);
  pc = Add(Mul(pc, x2), -1.0f / 720.0f);
  pc = Add(Mul(pc, x2), 1.0f / 24.0f);
  pc = Add(Mul(pc, x2), -0.5f);
  c = Add(Mul(pc, x2), 1.0f);
  float ps = 1.0f / 362880.0f;
  ps = Add(Mul(ps, x2), -1.0f / 5040.0f);
  ps = Add(Mul(ps, x2), 1.0f / 120.0f);
  ps = Add(Mul(ps, x2), -1.0f / 6.0f);
  s = Add(Mul(Mul(ps, x2), x), x);
}

}  // namespace counter_normal

// The per-stream key of seed (computed once per tensor).
M3_HOST_DEVICE inline uint64_t NormalStreamKey(uint64_t seed) {
  return Mix64(seed ^ 0x3c6ef372fe94f82bULL);
}

// Normals 2p and 2p + 1 of the stream.
M3_HOST_DEVICE inline void CounterNormalPair(uint64_t key, uint64_t p, float& z0, float& z1) {
  namespace cn = counter_normal;
  const uint64_t x = Mix64(key + 0x9e3779b97f4a7c15ULL * (p + 1));
  // u1 = (top 40 bits + 1) / 2^40 in (0, 1]: ln(u1) >= -27.8.
  const float u1 = cn::Mul(static_cast<float>(static_cast<int64_t>(x >> 24) + 1), 0x1.0p-40f);
  const float r = cn::Sqrt(cn::Mul(-2.0f, cn::LogUnit(u1)));
  // The angle 2 pi j / 2^24: quadrant q = j >> 22, then the remaining quarter turn folded to
  // [0, pi/4] (the fold and the quarter-turn offsets are exact in float).
  const uint32_t j = static_cast<uint32_t>(x) & 0xffffffu;
  const uint32_t q = j >> 22, f = j & 0x3fffffu;
  const bool upper = f >= (1u << 21);
  const float t = static_cast<float>(upper ? (1u << 22) - f : f) * 0x1.0p-24f;  // turns
  float c, s;
  cn::CosSinEighth(cn::Mul(t, 6.28318531f), c, s);
  if (upper) {  // cos(pi/2 - y) = sin(y)
    const float tmp = c;
    c = s;
    s = tmp;
  }
  float cq = c, sq = s;  // rotate by q quarter turns
  if (q == 1) {
    cq = -s;
    sq = c;
  } else if (q == 2) {
    cq = -c;
    sq = -s;
  } else if (q == 3) {
    cq = s;
    sq = -c;
  }
  z0 = cn::Mul(r, cq);
  z1 = cn::Mul(r, sq);
}

}  // namespace m3::kernels
