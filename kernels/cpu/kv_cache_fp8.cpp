// FP8 KV quantization per (row, head) vector with the index keys' e4m3 codec, and a table
// decode (256 codes) for the attention's per-key dequantization.
#include "kernels/cpu/kv_cache_fp8.h"

#include <array>

#include "kernels/cpu/float8.h"
#include "kernels/cpu/msa_index_fp8.h"

namespace m3::kernels::cpu {
namespace {

const std::array<float, 256>& E4M3Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[c] = E4M3ToF32(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

}  // namespace

void QuantizeKvRowsFp8(const float* x, int64_t rows, int64_t heads, int64_t dim,
                       const int64_t* slots, uint8_t* codes, float* scales) {
  for (int64_t r = 0; r < rows; ++r)
    if (slots[r] >= 0)
      QuantizeIndexKeysFp8(x + r * heads * dim, heads, dim, codes + slots[r] * heads * dim,
                           scales + slots[r] * heads);
}

void DequantizeKvVectorFp8(const uint8_t* codes, float scale, int64_t dim, float* out) {
  const std::array<float, 256>& t = E4M3Table();
  for (int64_t d = 0; d < dim; ++d) out[d] = t[codes[d]] * scale;
}

}  // namespace m3::kernels::cpu
