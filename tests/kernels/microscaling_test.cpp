// The block-scaled formats' codecs (kernels/cpu/float8.h) and row quantizers
// (kernels/cpu/microscaling.h) against known values: e4m3's largest finite 448 and its
// saturation, e8m0 127 = 1.0, the e2m1 table with its ties to even, the NVFP4 nibble order
// (the even element in the low nibble), and round trips within each format's rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/float8.h"
#include "kernels/cpu/microscaling.h"

namespace m3::kernels::cpu {
namespace {

TEST_CASE("e4m3: 448 is the largest finite value, saturation, NaN, every code round-trips") {
  CHECK(F32ToE4M3(448.0f) == 0x7e);
  CHECK(E4M3ToF32(0x7e) == 448.0f);
  CHECK(E4M3ToF32(0xfe) == -448.0f);
  CHECK(F32ToE4M3(1e6f) == 0x7e);  // saturates, as cvt.rn.satfinite
  CHECK(F32ToE4M3(-1e6f) == 0xfe);
  CHECK(std::isnan(E4M3ToF32(0x7f)));
  CHECK(std::isnan(E4M3ToF32(0xff)));
  CHECK(E4M3ToF32(0x38) == 1.0f);                  // exponent 7 (the bias), mantissa 0
  CHECK(E4M3ToF32(0x01) == std::ldexp(1.0f, -9));  // the smallest subnormal
  CHECK(F32ToE4M3(1.0625f) == 0x38);               // a tie between 1 and 1.125: even
  CHECK(F32ToE4M3(1.1875f) == 0x3a);               // a tie between 1.125 and 1.25: even
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    CAPTURE(c);
    CHECK(F32ToE4M3(E4M3ToF32(static_cast<uint8_t>(c))) == c);
  }
}

TEST_CASE("e8m0: a biased exponent alone") {
  CHECK(E8M0ToF32(127) == 1.0f);
  CHECK(E8M0ToF32(128) == 2.0f);
  CHECK(E8M0ToF32(120) == std::ldexp(1.0f, -7));
  CHECK(E8M0ToF32(0) == std::ldexp(1.0f, -127));
  CHECK(std::isnan(E8M0ToF32(0xff)));
}

TEST_CASE("e2m1: the table, signs, ties to the even code, saturation") {
  const float table[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (uint8_t i = 0; i < 8; ++i) {
    CHECK(E2M1ToF32(i) == table[i]);
    CHECK(E2M1ToF32(static_cast<uint8_t>(i | 8)) == -table[i]);
    CHECK(F32ToE2M1(table[i]) == i);
  }
  CHECK(F32ToE2M1(-1.5f) == 0xb);
  CHECK(F32ToE2M1(0.25f) == 0);  // 0 | 0.5: code 0
  CHECK(F32ToE2M1(0.75f) == 2);  // 0.5 | 1: code 2
  CHECK(F32ToE2M1(2.5f) == 4);   // 2 | 3: code 4
  CHECK(F32ToE2M1(5.0f) == 6);   // 4 | 6: code 6
  CHECK(F32ToE2M1(7.0f) == 7);
  CHECK(F32ToE2M1(100.0f) == 7);
  CHECK(E2M1ToF32(0xf7) == 6.0f);  // only the low 4 bits count
}

TEST_CASE("MXFP8 rows: the block exponent rule, zero blocks, exact and rounded round trips") {
  std::vector<float> w(64);
  for (int i = 0; i < 32; ++i) w[i] = (i % 2 ? -1.0f : 1.0f) * 448.0f * (i + 1) / 32.0f;
  // Block 2: all zero.
  std::vector<uint8_t> codes(64), scales(2);
  QuantizeMxfp8Row(w.data(), 64, codes.data(), scales.data());
  CHECK(scales[0] == 127);  // amax 448: e = ceil(log2(448 / 448)) = 0
  CHECK(scales[1] == 0);    // an all-zero block: e = -127
  std::vector<float> back(64);
  DequantizeMxfp8Row(codes.data(), scales.data(), 64, back.data());
  CHECK(back[31] == -448.0f);
  for (int i = 32; i < 64; ++i) CHECK(back[i] == 0.0f);
  // Values e4m3 holds exactly, times a power of two, come back exactly.
  std::vector<float> exact(32);
  for (int i = 0; i < 32; ++i) exact[i] = E4M3ToF32(static_cast<uint8_t>(0x20 + i)) * 0.25f;
  QuantizeMxfp8Row(exact.data(), 32, codes.data(), scales.data());
  DequantizeMxfp8Row(codes.data(), scales.data(), 32, back.data());
  for (int i = 0; i < 32; ++i) CHECK(back[i] == exact[i]);
  // Otherwise within e4m3's rounding: half a step of 3 mantissa bits, 2^-4 relative.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> r(256), rb(256);
  std::vector<uint8_t> rc(256), rs(8);
  for (float& x : r) x = normal(rng);
  QuantizeMxfp8Row(r.data(), 256, rc.data(), rs.data());
  DequantizeMxfp8Row(rc.data(), rs.data(), 256, rb.data());
  for (int i = 0; i < 256; ++i) {
    CAPTURE(i);
    const float block_amax_step = std::ldexp(1.0f, static_cast<int>(rs[i / 32]) - 127 - 9);
    CHECK(std::fabs(rb[i] - r[i]) <= std::max(std::fabs(r[i]) / 16.0f, block_amax_step));
  }
}

TEST_CASE("NVFP4 rows: the even element in the low nibble, the scales, round trips") {
  // amax 6 over the tensor: global = 6 / (6 * 448), the block scale 448, w / (s * g) = w.
  std::vector<float> w = {1, 6, 0.5f, -2, 0, 3, -6, 4, 1.5f, -0.5f, 2, 0, 0, 0, 0, 0};
  const float global = Nvfp4GlobalScale(6.0f);
  CHECK(global == doctest::Approx(6.0f / (6.0f * 448.0f)));
  std::vector<uint8_t> packed(8), scales(1);
  QuantizeNvfp4Row(w.data(), 16, global, packed.data(), scales.data());
  CHECK(E4M3ToF32(scales[0]) == 448.0f);
  CHECK(packed[0] == 0x72);  // element 0: 1.0 (code 2) low; element 1: 6 (code 7) high
  CHECK(packed[1] == 0xc1);  // 0.5 (code 1) low; -2 (code 8 | 4) high
  CHECK(packed[3] == 0x6f);  // -6 (code 15) low; 4 (code 6) high
  std::vector<float> back(16);
  DequantizeNvfp4Row(packed.data(), scales.data(), global, 16, back.data());
  for (int i = 0; i < 16; ++i) CHECK(back[i] == doctest::Approx(w[i]).epsilon(1e-6));
  // Random rows: each value within half an e2m1 step (at most 1 of 6) of its block's range,
  // plus the e4m3 rounding of the block scale.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> r(128), rb(128);
  float amax = 0;
  for (float& x : r) amax = std::max(amax, std::fabs(x = normal(rng)));
  const float g = Nvfp4GlobalScale(amax);
  std::vector<uint8_t> rp(64), rs(8);
  QuantizeNvfp4Row(r.data(), 128, g, rp.data(), rs.data());
  DequantizeNvfp4Row(rp.data(), rs.data(), g, 128, rb.data());
  double err = 0, norm = 0;
  for (int b = 0; b < 8; ++b) {
    float bmax = 0;
    for (int i = 0; i < 16; ++i) bmax = std::max(bmax, std::fabs(r[b * 16 + i]));
    for (int i = 0; i < 16; ++i) {
      const int k = b * 16 + i;
      CHECK(std::fabs(rb[k] - r[k]) <= bmax * (1.0f / 6.0f + 1.0f / 16.0f) + 1e-9f);
      err += (rb[k] - r[k]) * (rb[k] - r[k]);
      norm += r[k] * r[k];
    }
  }
  CHECK(std::sqrt(err / norm) < 0.15);  // 4-bit values: about 10% relative error
  CHECK(std::sqrt(err / norm) > 0.0);   // and really quantized
}

}  // namespace
}  // namespace m3::kernels::cpu
