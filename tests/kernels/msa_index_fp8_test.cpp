// The FP8 (e4m3) index-key twin (kernels/cpu/msa_index_fp8.h): the encoder against the format's
// definition (subnormals, round half to even, saturation, NaN), per-key quantization (scale and
// error bound), and the FP8 selection, which equals the float selection when the keys are
// exactly representable.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/msa_index_fp8.h"
#include "kernels/cpu/paged_msa_indexer.h"

namespace m3::test {
namespace {

namespace kp = m3::kernels::cpu;

TEST_CASE("e4m3 encoding follows the format") {
  CHECK(kp::E4M3ToF32(0x00) == 0.0f);
  CHECK(kp::E4M3ToF32(0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
  CHECK(kp::E4M3ToF32(0x08) == std::ldexp(1.0f, -6));  // smallest normal
  CHECK(kp::E4M3ToF32(0x38) == 1.0f);
  CHECK(kp::E4M3ToF32(0xb8) == -1.0f);
  CHECK(kp::E4M3ToF32(0x7e) == 448.0f);
  CHECK(std::isnan(kp::E4M3ToF32(0x7f)));
  CHECK(kp::F32ToE4M3(1.0f) == 0x38);
  CHECK(kp::F32ToE4M3(448.0f) == 0x7e);
  CHECK(kp::F32ToE4M3(1000.0f) == 0x7e);  // saturated, not NaN
  CHECK(kp::F32ToE4M3(-1e30f) == 0xfe);
  CHECK(kp::F32ToE4M3(std::numeric_limits<float>::quiet_NaN()) == 0x7f);
  // Round half to even: 1 + 1/16 lies between mantissas 0 and 1 (to 0), 1 + 3/16 between 1
  // and 2 (to 2); half a subnormal step goes to 0, one and a half steps to 2.
  CHECK(kp::F32ToE4M3(1.0625f) == 0x38);
  CHECK(kp::F32ToE4M3(1.1875f) == 0x3a);
  CHECK(kp::F32ToE4M3(std::ldexp(1.0f, -10)) == 0x00);
  CHECK(kp::F32ToE4M3(3 * std::ldexp(1.0f, -10)) == 0x02);
  CHECK(kp::F32ToE4M3(1.06f) == 0x38);  // nearest on either side of the midpoint 1.0625
  CHECK(kp::F32ToE4M3(1.07f) == 0x39);
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f) CHECK(kp::F32ToE4M3(kp::E4M3ToF32(static_cast<uint8_t>(c))) == c);
}

TEST_CASE("FP8 index keys: per-key scale and rounding bound") {
  const int64_t n = 64, dim = 128;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> keys(n * dim);
  for (float& x : keys) x = u(rng);
  for (int64_t d = 0; d < dim; ++d) keys[9 * dim + d] = 0.0f;
  std::vector<uint8_t> codes(n * dim);
  std::vector<float> scales(n), back(n * dim);
  kp::QuantizeIndexKeysFp8(keys.data(), n, dim, codes.data(), scales.data());
  kp::DequantizeIndexKeysFp8(codes.data(), scales.data(), n, dim, back.data());
  CHECK(scales[9] == 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    float amax = 0.0f;
    for (int64_t d = 0; d < dim; ++d) amax = std::max(amax, std::fabs(keys[i * dim + d]));
    if (i != 9) CHECK(scales[i] == amax / 448.0f);
    for (int64_t d = 0; d < dim; ++d) {
      const float x = keys[i * dim + d], err = std::fabs(back[i * dim + d] - x);
      // Half a unit in the last place: 2^-4 relative for normals, 2^-10 x scale below them.
      CHECK(err <= std::max(std::fabs(x) * 0.0625f, scales[i] * std::ldexp(1.0f, -10)) * 1.0001f);
    }
  }
}

TEST_CASE("FP8 index keys: quantize-on-write puts each row's key at its slot") {
  const int64_t rows = 5, dim = 16, slots_n = 12;
  std::vector<float> keys(rows * dim);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<float>(i % 23) - 11.0f;
  const std::vector<int64_t> slots = {7, -1, 0, 11, 3};
  std::vector<uint8_t> codes(slots_n * dim, 0xAA);
  std::vector<float> scales(slots_n, -1.0f);
  kp::QuantizeIndexKeyRowsFp8(keys.data(), rows, dim, slots.data(), codes.data(), scales.data());
  for (int64_t r = 0; r < rows; ++r) {
    if (slots[r] < 0) continue;
    std::vector<uint8_t> want(dim);
    float scale = 0;
    kp::QuantizeIndexKeysFp8(keys.data() + r * dim, 1, dim, want.data(), &scale);
    CHECK(scales[slots[r]] == scale);
    CHECK(std::vector<uint8_t>(codes.begin() + slots[r] * dim,
                               codes.begin() + (slots[r] + 1) * dim) == want);
  }
  // Slots no row names keep their contents.
  for (int64_t s : {1, 2, 4, 5, 6, 8, 9, 10}) {
    CHECK(scales[s] == -1.0f);
    CHECK(codes[s * dim] == 0xAA);
  }
}

TEST_CASE("FP8 selection equals the float selection on exactly representable keys") {
  // Keys made of e4m3 values, each with one element at 448 so its scale is exactly 1: the
  // quantization is exact and the two selections must agree block for block.
  const int64_t heads = 2, dim = 32, page = 16, pages = 40, slots = pages * page;
  std::mt19937 rng(7);
  std::vector<float> keys(slots * dim), q(3 * heads * dim);
  for (int64_t i = 0; i < slots; ++i)
    for (int64_t d = 0; d < dim; ++d)
      keys[i * dim + d] = d == i % dim ? 448.0f : kp::E4M3ToF32(static_cast<uint8_t>(rng() % 0x7e));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : q) x = u(rng);
  std::vector<uint8_t> codes(slots * dim);
  std::vector<float> scales(slots);
  kp::QuantizeIndexKeysFp8(keys.data(), slots, dim, codes.data(), scales.data());
  for (float sc : scales) CHECK(sc == 1.0f);
  // Two sequences: a decode at 300 and a 2-row chunk at 250, pages from the pool.
  std::vector<int32_t> query_start{0, 1, 3}, context_lens{300, 250}, tables(2 * 20);
  for (int32_t i = 0; i < 40; ++i) tables[i] = (i * 7) % 40;
  const kp::PagedLayout layout{2, query_start.data(), context_lens.data(), tables.data(), 20, page};
  const kp::IndexerParams p{heads, dim, 16, 4, 1};
  std::vector<int32_t> a(heads * 3 * 4), b(a.size());
  kp::PagedIndexerSelectBlocks(q.data(), keys.data(), layout, p, a.data());
  kp::PagedIndexerSelectBlocksFp8(q.data(), codes.data(), scales.data(), slots, layout, p,
                                  b.data());
  CHECK(a == b);
}

}  // namespace
}  // namespace m3::test
