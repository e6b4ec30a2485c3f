// MXFP8 and NVFP4 row quantization and dequantization by the rules in microscaling.h.
#include "kernels/cpu/microscaling.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/float8.h"

namespace m3::kernels::cpu {

namespace {
constexpr float kE4M3Max = 448.0f;
constexpr float kE2M1Max = 6.0f;

float BlockAmax(const float* w, int64_t n) {
  float a = 0.0f;
  for (int64_t i = 0; i < n; ++i) a = std::max(a, std::fabs(w[i]));
  return a;
}
}  // namespace

void QuantizeMxfp8Row(const float* w, int64_t K, uint8_t* codes, uint8_t* scales) {
  for (int64_t b = 0; b < K / kMxfp8Block; ++b) {
    const float* x = w + b * kMxfp8Block;
    const float amax = BlockAmax(x, kMxfp8Block);
    int e = -127;
    if (amax > 0.0f)
      e = std::clamp(static_cast<int>(std::ceil(std::log2(amax / kE4M3Max))), -127, 127);
    scales[b] = static_cast<uint8_t>(e + 127);
    for (int64_t i = 0; i < kMxfp8Block; ++i)
      codes[b * kMxfp8Block + i] = F32ToE4M3(std::ldexp(x[i], -e));  // saturates at 448
  }
}

void DequantizeMxfp8Row(const uint8_t* codes, const uint8_t* scales, int64_t K, float* out) {
  for (int64_t k = 0; k < K; ++k) out[k] = E4M3ToF32(codes[k]) * E8M0ToF32(scales[k / kMxfp8Block]);
}

float Nvfp4GlobalScale(float amax) {
  return amax > 0.0f ? amax / (kE2M1Max * kE4M3Max) : 1.0f;
}

void QuantizeNvfp4Row(const float* w, int64_t K, float global_scale, uint8_t* packed,
                      uint8_t* scales) {
  for (int64_t b = 0; b < K / kNvfp4Block; ++b) {
    const float* x = w + b * kNvfp4Block;
    const uint8_t s = F32ToE4M3(BlockAmax(x, kNvfp4Block) / (kE2M1Max * global_scale));
    scales[b] = s;
    const float step = E4M3ToF32(s) * global_scale;
    for (int64_t i = 0; i < kNvfp4Block; i += 2) {
      const uint8_t lo = step > 0.0f ? F32ToE2M1(x[i] / step) : 0;
      const uint8_t hi = step > 0.0f ? F32ToE2M1(x[i + 1] / step) : 0;
      packed[(b * kNvfp4Block + i) / 2] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void DequantizeNvfp4Row(const uint8_t* packed, const uint8_t* scales, float global_scale, int64_t K,
                        float* out) {
  for (int64_t k = 0; k < K; ++k) {
    const uint8_t byte = packed[k / 2];
    const uint8_t nibble = (k & 1) ? byte >> 4 : byte & 15;
    out[k] = E2M1ToF32(nibble) * E4M3ToF32(scales[k / kNvfp4Block]) * global_scale;
  }
}

}  // namespace m3::kernels::cpu
