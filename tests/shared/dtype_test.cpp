// DType conversions against hand-computed bit patterns.
#include <doctest/doctest.h>

#include <cmath>

#include "shared/dtype.h"

TEST_CASE("bf16 and f16 decode to the expected floats") {
  CHECK(m3::BF16ToF32(0x3f80) == 1.0f);
  CHECK(m3::BF16ToF32(0xc040) == -3.0f);
  CHECK(m3::F16ToF32(0x3c00) == 1.0f);
  CHECK(m3::F16ToF32(0xc500) == -5.0f);
  CHECK(m3::F16ToF32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(m3::F16ToF32(0x7bff) == 65504.0f);
  CHECK(std::isinf(m3::F16ToF32(0x7c00)));
  CHECK(std::isnan(m3::F16ToF32(0x7e00)));
  CHECK(m3::F32ToBF16(1.0f) == 0x3f80);
  CHECK(m3::BF16ToF32(m3::F32ToBF16(3.14159f)) == doctest::Approx(3.140625f));
}

TEST_CASE("dtype names round-trip") {
  for (auto t : {m3::DType::kF32, m3::DType::kBF16, m3::DType::kF16, m3::DType::kI64,
                 m3::DType::kBool, m3::DType::kF8E4M3, m3::DType::kF8E8M0}) {
    CHECK(m3::ParseDType(m3::DTypeName(t)) == t);
  }
  CHECK(m3::DTypeSize(m3::DType::kF8E4M3) == 1);
  CHECK_FALSE(m3::ParseDType("F4").has_value());
}
