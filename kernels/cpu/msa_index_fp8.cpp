// e4m3 encoding and decoding by the format's definition (bias 7, 3 mantissa bits, subnormals
// in steps of 2^-9, no infinities, 0x7f the NaN), per-vector quantization, and the FP8
// selection as dequantization + the float twin.
#include "kernels/cpu/msa_index_fp8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/paged_msa_indexer.h"

namespace m3::kernels::cpu {

namespace {
constexpr float kE4M3Max = 448.0f;
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

void QuantizeIndexKeysFp8(const float* keys, int64_t n, int64_t dim, uint8_t* codes,
                          float* scales) {
  for (int64_t i = 0; i < n; ++i) {
    const float* k = keys + i * dim;
    float amax = 0.0f;
    for (int64_t d = 0; d < dim; ++d) amax = std::max(amax, std::fabs(k[d]));
    const float scale = amax > 0.0f ? amax / kE4M3Max : 1.0f;
    scales[i] = scale;
    for (int64_t d = 0; d < dim; ++d) codes[i * dim + d] = F32ToE4M3(k[d] / scale);
  }
}

void QuantizeIndexKeyRowsFp8(const float* keys, int64_t rows, int64_t dim, const int64_t* slots,
                             uint8_t* codes, float* scales) {
  for (int64_t r = 0; r < rows; ++r)
    if (slots[r] >= 0)
      QuantizeIndexKeysFp8(keys + r * dim, 1, dim, codes + slots[r] * dim, scales + slots[r]);
}

void DequantizeIndexKeysFp8(const uint8_t* codes, const float* scales, int64_t n, int64_t dim,
                            float* keys) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < dim; ++d) keys[i * dim + d] = E4M3ToF32(codes[i * dim + d]) * scales[i];
}

void PagedIndexerSelectBlocksFp8(const float* index_q, const uint8_t* codes, const float* scales,
                                 int64_t slots, const PagedLayout& layout, const IndexerParams& p,
                                 int32_t* selected) {
  std::vector<float> keys(static_cast<size_t>(slots * p.head_dim));
  DequantizeIndexKeysFp8(codes, scales, slots, p.head_dim, keys.data());
  PagedIndexerSelectBlocks(index_q, keys.data(), layout, p, selected);
}

}  // namespace m3::kernels::cpu
