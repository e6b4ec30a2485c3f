// Per-vector e4m3 quantization (float8.h's codec) and the FP8 selection as dequantization +
// the float twin.
#include "kernels/cpu/msa_index_fp8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/paged_msa_indexer.h"

namespace m3::kernels::cpu {

namespace {
constexpr float kE4M3Max = 448.0f;
}  // namespace

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
