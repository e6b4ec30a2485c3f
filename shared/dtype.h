// Element types found in safetensors files, their sizes and names, and the conversions of the
// 16-bit float formats to float32 (bit-exact: bf16 is the top half of an f32; f16 is IEEE half).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace m3 {

// kF8E4M3 / kF8E5M2: OCP FP8 codes; kF8E8M0: a bare biased power-of-two exponent (microscaling
// block scales). They hold quantized weights and scales, never plain float data (ToFloat32 refuses
// them: their meaning depends on the scales beside them).
enum class DType {
  kF32,
  kF16,
  kBF16,
  kF64,
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
  kF8E4M3,
  kF8E5M2,
  kF8E8M0
};

size_t DTypeSize(DType t);
std::string_view DTypeName(DType t);                     // safetensors spelling: "F32", "BF16", ...
std::optional<DType> ParseDType(std::string_view name);  // nullopt for unknown names

inline float BF16ToF32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round-to-nearest-even, NaN kept quiet.
inline uint16_t F32ToBF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float F16ToF32(uint16_t v);

}  // namespace m3
