// The CPU twin of the GPU's block-scaled products (kernels/cpu/block_scaled_linear.h) against
// naive sums over the row dequantizers of microscaling.h: both formats, several rows with their
// own NVFP4 global scales, a product with more than one input row.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/block_scaled_linear.h"
#include "kernels/cpu/microscaling.h"

namespace m3::kernels::cpu {
namespace {

TEST_CASE("BlockScaledLinear: x . dequantized W^T for MXFP8 and NVFP4") {
  const int64_t n = 6, k = 64, m = 3;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> w(n * k), x(m * k);
  for (float& v : w) v = u(rng);
  for (float& v : x) v = u(rng);
  for (const BlockScaledFormat f : {BlockScaledFormat::kMxfp8, BlockScaledFormat::kNvfp4}) {
    const bool mx = f == BlockScaledFormat::kMxfp8;
    CAPTURE(mx);
    const int64_t code_cols = mx ? k : k / 2, scale_cols = k / (mx ? 32 : 16);
    std::vector<uint8_t> codes(n * code_cols), scales(n * scale_cols);
    std::vector<float> row_scale(n), row(k), want(m * n, 0.0f), got(m * n);
    for (int64_t r = 0; r < n; ++r) {
      row_scale[r] = Nvfp4GlobalScale(1.0f + static_cast<float>(r));  // each row its own
      if (mx)
        QuantizeMxfp8Row(&w[r * k], k, &codes[r * code_cols], &scales[r * scale_cols]);
      else
        QuantizeNvfp4Row(&w[r * k], k, row_scale[r], &codes[r * code_cols],
                         &scales[r * scale_cols]);
      if (mx)
        DequantizeMxfp8Row(&codes[r * code_cols], &scales[r * scale_cols], k, row.data());
      else
        DequantizeNvfp4Row(&codes[r * code_cols], &scales[r * scale_cols], row_scale[r], k,
                           row.data());
      for (int64_t i = 0; i < m; ++i) {
        double s = 0.0;
        for (int64_t c = 0; c < k; ++c) s += double(x[i * k + c]) * row[c];
        want[i * n + r] = static_cast<float>(s);
      }
    }
    BlockScaledLinear(x.data(), m, f, codes.data(), scales.data(), row_scale.data(), n, k,
                      got.data());
    for (int64_t i = 0; i < m * n; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
    // The dequantized weights are close to the originals (the product is of the right matrix).
    std::vector<float> dense(n * k);
    DequantizeBlockScaled(f, codes.data(), scales.data(), row_scale.data(), n, k, dense.data());
    double err = 0.0, ref = 0.0;
    for (int64_t i = 0; i < n * k; ++i) {
      err += (dense[i] - w[i]) * (dense[i] - w[i]);
      ref += w[i] * w[i];
    }
    CHECK(std::sqrt(err / ref) < (mx ? 0.05 : 0.15));
  }
}

}  // namespace
}  // namespace m3::kernels::cpu
