// The dummy-weight draws (kernels/cpu/random_fill.h): the normal stream's moments and tails,
// chunking (a slice of the stream is the stream's slice), the block quantization equal to
// microscaling.h's row quantizers on the same values, and the dequantized spread of each format.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/float8.h"
#include "kernels/cpu/microscaling.h"
#include "kernels/cpu/random_fill.h"
#include "kernels/microscaling_block.h"

namespace m3::test {
namespace {

namespace kp = m3::kernels::cpu;

struct Moments {
  double mean = 0, std = 0, beyond2 = 0, beyond4 = 0, max_abs = 0;
};
Moments Measure(const std::vector<float>& v, double sigma) {
  Moments m;
  double s = 0, s2 = 0;
  for (float x : v) {
    s += x;
    s2 += static_cast<double>(x) * x;
    m.beyond2 += std::fabs(x) > 2 * sigma;
    m.beyond4 += std::fabs(x) > 4 * sigma;
    m.max_abs = std::max(m.max_abs, std::fabs(static_cast<double>(x)));
  }
  const double n = static_cast<double>(v.size());
  m.mean = s / n;
  m.std = std::sqrt(s2 / n - m.mean * m.mean);
  m.beyond2 /= n;
  m.beyond4 /= n;
  return m;
}

TEST_CASE("dummy normals: moments, tails, and pairs uncorrelated") {
  const int64_t n = int64_t{1} << 22;
  std::vector<float> v(n);
  kp::RandomNormal(7, 0.0f, 1.0f, 0, n, v.data());
  const Moments m = Measure(v, 1.0);
  CHECK(std::fabs(m.mean) < 3e-3);
  CHECK(std::fabs(m.std - 1.0) < 2e-3);
  CHECK(std::fabs(m.beyond2 - 0.0455) < 1e-3);   // P(|z| > 2)
  CHECK(std::fabs(m.beyond4 - 6.33e-5) < 2e-5);  // P(|z| > 4)
  CHECK(m.max_abs < 7.5);
  double c = 0;
  for (int64_t i = 0; i < n; i += 2) c += static_cast<double>(v[i]) * v[i + 1];
  CHECK(std::fabs(c / (n / 2)) < 3e-3);
  // mean and std apply as mean + std * z, and a different seed is a different stream.
  std::vector<float> w(1000), x(1000);
  kp::RandomNormal(7, 1.0f, 0.02f, 0, 1000, w.data());
  kp::RandomNormal(8, 0.0f, 1.0f, 0, 1000, x.data());
  int same = 0;
  for (int i = 0; i < 1000; ++i) {
    CHECK(w[i] == doctest::Approx(1.0f + 0.02f * v[i]).epsilon(1e-6));
    same += x[i] == v[i];
  }
  CHECK(same == 0);
}

TEST_CASE("dummy normals: any slice of the stream is that slice") {
  std::vector<float> all(1001), part(300);
  kp::RandomNormal(3, 0.5f, 2.0f, 0, 1001, all.data());
  for (int64_t begin : {0, 1, 2, 501, 700}) {
    kp::RandomNormal(3, 0.5f, 2.0f, begin, 300, part.data());
    for (int i = 0; i < 300; ++i) REQUIRE(part[i] == all[begin + i]);
  }
  std::vector<float> constant(10);
  kp::RandomNormal(3, 1.0f, 0.0f, 0, 10, constant.data());
  for (float c : constant) CHECK(c == 1.0f);
}

TEST_CASE("exact MXFP8 block exponent and the e2m1 encoder") {
  CHECK(kernels::CeilLog2(1.0f) == 0);
  CHECK(kernels::CeilLog2(1.0000001f) == 1);
  CHECK(kernels::CeilLog2(0.75f) == 0);
  CHECK(kernels::CeilLog2(0.5f) == -1);
  CHECK(kernels::CeilLog2(std::ldexp(1.0f, -140)) == -140);
  CHECK(kernels::CeilLog2(std::ldexp(1.5f, -140)) == -139);
  CHECK(kernels::Mxfp8BlockExponent(0.0f) == -127);
  CHECK(kernels::Mxfp8BlockExponent(448.0f) == 0);
  CHECK(kernels::Mxfp8BlockExponent(449.0f) == 1);
  CHECK(kernels::Mxfp8BlockExponent(1e30f) == 91);  // 2^90.3 < 1e30 / 448
  CHECK(kernels::Pow2(-127) == std::ldexp(1.0f, -127));
  CHECK(kernels::Pow2(20) == std::ldexp(1.0f, 20));
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    CHECK(kernels::E4M3Decode(static_cast<uint8_t>(c)) == kp::E4M3ToF32(static_cast<uint8_t>(c)));
  }
  for (float x = -7.0f; x <= 7.0f; x += 0.0625f) CHECK(kernels::E2M1Encode(x) == kp::F32ToE2M1(x));
}

// The quantized twins against microscaling.h's row quantizers on the same normals, and the
// spread of the dequantized weights.
TEST_CASE("dummy MXFP8 and NVFP4 Linears: microscaling.h's codes, std 0.02 after dequantizing") {
  const int64_t N = 96, K = 6144;
  const float sd = 0.02f;
  std::vector<float> w(N * K), deq(N * K);
  kp::RandomNormal(11, 0.0f, sd, 0, N * K, w.data());

  std::vector<uint8_t> codes(N * K), scales(N * K / 32), ref_codes(N * K), ref_scales(N * K / 32);
  kp::RandomMxfp8Rows(11, sd, K, 0, N, codes.data(), scales.data());
  for (int64_t r = 0; r < N; ++r)
    kp::QuantizeMxfp8Row(w.data() + r * K, K, ref_codes.data() + r * K,
                         ref_scales.data() + r * K / 32);
  CHECK(codes == ref_codes);
  CHECK(scales == ref_scales);
  for (int64_t r = 0; r < N; ++r)
    kp::DequantizeMxfp8Row(codes.data() + r * K, scales.data() + r * K / 32, K, deq.data() + r * K);
  Moments m = Measure(deq, sd);
  MESSAGE("MXFP8 dummy: dequantized std " << m.std << " (drawn with 0.02)");
  CHECK(std::fabs(m.std / sd - 1) < 5e-3);
  CHECK(std::fabs(m.mean) < 1e-4);
  // A later row range is that part of the whole.
  std::vector<uint8_t> part(10 * K), part_scales(10 * K / 32);
  kp::RandomMxfp8Rows(11, sd, K, 40, 10, part.data(), part_scales.data());
  CHECK(std::equal(part.begin(), part.end(), codes.begin() + 40 * K));

  const float global = kp::DummyNvfp4GlobalScale(sd);
  CHECK(global == doctest::Approx(8 * sd / 2688));
  std::vector<uint8_t> packed(N * K / 2), s4(N * K / 16), ref_packed(N * K / 2), ref_s4(N * K / 16);
  kp::RandomNvfp4Rows(11, sd, global, K, 0, N, packed.data(), s4.data());
  for (int64_t r = 0; r < N; ++r)
    kp::QuantizeNvfp4Row(w.data() + r * K, K, global, ref_packed.data() + r * K / 2,
                         ref_s4.data() + r * K / 16);
  CHECK(packed == ref_packed);
  CHECK(s4 == ref_s4);
  for (int64_t r = 0; r < N; ++r)
    kp::DequantizeNvfp4Row(packed.data() + r * K / 2, s4.data() + r * K / 16, global, K,
                           deq.data() + r * K);
  m = Measure(deq, sd);
  MESSAGE("NVFP4 dummy: dequantized std " << m.std << " (drawn with 0.02)");
  CHECK(std::fabs(m.std / sd - 1) < 0.03);
  CHECK(std::fabs(m.mean) < 1e-4);
  for (uint8_t s : s4) CHECK_MESSAGE(s < 0x7f, "block scales are finite and not saturated");
}

}  // namespace
}  // namespace m3::test
