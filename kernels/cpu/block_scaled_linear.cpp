// The weight dequantized row by row (microscaling.h), then the float32 product (matmul.h).
#include "kernels/cpu/block_scaled_linear.h"

#include <cstddef>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/microscaling.h"

namespace m3::kernels::cpu {

void DequantizeBlockScaled(BlockScaledFormat format, const uint8_t* codes, const uint8_t* scales,
                           const float* row_scale, int64_t n, int64_t k, float* w) {
  for (int64_t r = 0; r < n; ++r) {
    if (format == BlockScaledFormat::kMxfp8)
      DequantizeMxfp8Row(codes + r * k, scales + r * (k / kMxfp8Block), k, w + r * k);
    else
      DequantizeNvfp4Row(codes + r * (k / 2), scales + r * (k / kNvfp4Block), row_scale[r], k,
                         w + r * k);
  }
}

void BlockScaledLinear(const float* x, int64_t m, BlockScaledFormat format, const uint8_t* codes,
                       const uint8_t* scales, const float* row_scale, int64_t n, int64_t k,
                       float* y) {
  std::vector<float> w(static_cast<size_t>(n * k));
  DequantizeBlockScaled(format, codes, scales, row_scale, n, k, w.data());
  Linear(x, m, k, w.data(), n, nullptr, y);
}

}  // namespace m3::kernels::cpu
