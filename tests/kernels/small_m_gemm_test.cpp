// The small-M paths: SmallMLinear (nn.Linear layout, with and without bias) and
// SmallMGemmKMajor on every ISA this CPU runs against a double
// product (odd sizes, strided sub-matrices, nothing written outside the output), each row equal
// bit for bit whether computed alone or among others, LinearKMajor against Linear, the expert
// transpose round trip, and the K-major grouped experts against the nn.Linear-layout reference
// with groups on both sides of kSmallExpertRows.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_experts.h"
#include "kernels/cpu/small_m_gemm.h"
#include "kernels/cpu/small_m_linear.h"

namespace m3::test {
namespace {

namespace k = m3::kernels::cpu;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<k::GemmIsa> SupportedIsas() {
  std::vector<k::GemmIsa> isas;
  for (auto isa : {k::GemmIsa::kPortable, k::GemmIsa::kAvx2, k::GemmIsa::kAvx512})
    if (k::CpuSupports(isa)) isas.push_back(isa);
  return isas;
}

TEST_CASE("SmallMGemmKMajor equals a double product on every supported ISA") {
  struct Shape {
    int64_t m, k, n;
  };
  const Shape shapes[] = {{1, 1, 1},    {1, 64, 64},  {3, 17, 5},    {6, 40, 64},  {7, 33, 65},
                          {8, 128, 96}, {13, 9, 130}, {16, 64, 200}, {20, 31, 47}, {2, 300, 16}};
  for (auto isa : SupportedIsas()) {
    CAPTURE(k::GemmIsaName(isa));
    for (const auto& s : shapes) {
      CAPTURE(s.m);
      CAPTURE(s.k);
      CAPTURE(s.n);
      // Sub-matrices of larger arrays: strides wider than the rows, output guarded by a sentinel.
      const int64_t ldx = s.k + 3, ldw = s.n + 5, ldy = s.n + 7;
      const auto x = Random(s.m * ldx, 1), w = Random(s.k * ldw, 2);
      constexpr float kSentinel = 12345.0f;
      std::vector<float> y(s.m * ldy, kSentinel);
      k::SmallMGemmKMajor(x.data(), s.m, ldx, s.k, w.data(), ldw, s.n, y.data(), ldy, isa);
      double worst = 0.0;
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          double want = 0.0, scale = 0.0;
          for (int64_t t = 0; t < s.k; ++t) {
            want += double(x[i * ldx + t]) * double(w[t * ldw + j]);
            scale += std::fabs(double(x[i * ldx + t]) * double(w[t * ldw + j]));
          }
          worst = std::max(worst, std::fabs(y[i * ldy + j] - want) / (scale + 1e-30));
        }
        for (int64_t j = s.n; j < ldy; ++j) CHECK(y[i * ldy + j] == kSentinel);
      }
      CHECK(worst < 1e-6);
    }
  }
}

TEST_CASE("SmallMGemmKMajor gives each row the same bits alone or among other rows") {
  const int64_t k = 96, n = 150;
  const auto x = Random(16 * k, 3), w = Random(k * n, 4);
  for (auto isa : SupportedIsas()) {
    CAPTURE(k::GemmIsaName(isa));
    std::vector<float> all(16 * n);
    k::SmallMGemmKMajor(x.data(), 16, k, k, w.data(), n, n, all.data(), n, isa);
    for (int64_t m : {1, 5, 9}) {
      for (int64_t first = 0; first + m <= 16; first += 7) {
        std::vector<float> part(m * n);
        k::SmallMGemmKMajor(x.data() + first * k, m, k, k, w.data(), n, n, part.data(), n, isa);
        CHECK(std::memcmp(part.data(), all.data() + first * n, part.size() * sizeof(float)) == 0);
      }
    }
    // Column sub-ranges (how the MoE tasks split the work) give the same bits too.
    std::vector<float> cols(16 * n);
    for (int64_t c0 = 0; c0 < n; c0 += 64)
      k::SmallMGemmKMajor(x.data(), 16, k, k, w.data() + c0, n, std::min<int64_t>(64, n - c0),
                          cols.data() + c0, n, isa);
    CHECK(std::memcmp(cols.data(), all.data(), all.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("SmallMLinear equals a double product and gives each row the same bits alone") {
  struct Shape {
    int64_t m, k, n;
  };
  const Shape shapes[] = {{1, 1, 1},   {1, 512, 64}, {3, 17, 5},
                          {6, 40, 67}, {7, 33, 130}, {16, 100, 9}};
  for (const auto& s : shapes) {
    CAPTURE(s.m);
    CAPTURE(s.k);
    CAPTURE(s.n);
    const auto x = Random(s.m * s.k, 11), w = Random(s.n * s.k, 12), bias = Random(s.n, 13);
    for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
      std::vector<float> y(s.m * s.n, 0.0f);
      if (!k::SmallMLinear(x.data(), s.m, s.k, w.data(), s.n, b, y.data())) {
        MESSAGE("no AVX-512 here: SmallMLinear declines (Linear uses sgemm)");
        return;
      }
      double worst = 0.0;
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          double want = b ? b[j] : 0.0, scale = b ? std::fabs(b[j]) : 0.0;
          for (int64_t t = 0; t < s.k; ++t) {
            want += double(x[i * s.k + t]) * double(w[j * s.k + t]);
            scale += std::fabs(double(x[i * s.k + t]) * double(w[j * s.k + t]));
          }
          worst = std::max(worst, std::fabs(y[i * s.n + j] - want) / (scale + 1e-30));
        }
      }
      CHECK(worst < 1e-6);
      for (int64_t i = 0; i < s.m; ++i) {
        std::vector<float> alone(s.n);
        k::SmallMLinear(x.data() + i * s.k, 1, s.k, w.data(), s.n, b, alone.data());
        CHECK(std::memcmp(alone.data(), y.data() + i * s.n, s.n * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("TransposeEachExpert round-trips and LinearKMajor equals Linear") {
  const int64_t E = 3, N = 70, K = 45, M = 37;
  const auto w = Random(E * N * K, 5), x = Random(M * K, 6);
  std::vector<float> wt(w.size()), back(w.size());
  k::TransposeEachExpert(w.data(), E, N, K, wt.data());
  for (int64_t e = 0; e < E; ++e)
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < K; ++c)
        REQUIRE(wt[e * N * K + c * N + r] == w[e * N * K + r * K + c]);
  k::TransposeEachExpert(wt.data(), E, K, N, back.data());
  CHECK(back == w);
  for (int64_t e = 0; e < E; ++e) {
    std::vector<float> want(M * N), got(M * N);
    k::Linear(x.data(), M, K, w.data() + e * N * K, N, nullptr, want.data());
    k::LinearKMajor(x.data(), M, K, wt.data() + e * N * K, N, got.data());
    for (size_t i = 0; i < want.size(); ++i)
      CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
  }
}

TEST_CASE("K-major grouped experts equal the nn.Linear-layout reference, small and large groups") {
  // Expert 0 takes every row (a group over kSmallExpertRows, the sgemm path); the second pick
  // spreads over the others (groups of a few rows, the small-M path); expert 5 gets none.
  const int64_t rows = 40, H = 72, I = 40, E = 6, K = 2;
  const auto x = Random(rows * H, 7), gu = Random(E * 2 * I * H, 8), down = Random(E * H * I, 9);
  std::vector<int32_t> ids(rows * K);
  std::vector<float> wts(rows * K);
  for (int64_t r = 0; r < rows; ++r) {
    ids[r * K] = static_cast<int32_t>(1 + r % 4);
    ids[r * K + 1] = 0;  // after the other pick: the un-permutation sorts by expert id
    wts[r * K] = 0.25f + 0.01f * static_cast<float>(r);
    wts[r * K + 1] = 0.6f;
  }
  std::vector<float> gut(gu.size()), downt(down.size());
  k::TransposeEachExpert(gu.data(), E, 2 * I, H, gut.data());
  k::TransposeEachExpert(down.data(), E, H, I, downt.data());
  const k::MoeExpertsDims d{H, I, E, K, 1.702f, 7.0f, 1.5f};
  const auto base = Random(rows * H, 10);
  std::vector<float> want = base, got = base;
  k::MoeGroupedExperts(x.data(), rows, ids.data(), wts.data(), gu.data(), down.data(), d,
                       want.data());
  k::MoeGroupedExpertsKMajor(x.data(), rows, ids.data(), wts.data(), gut.data(), downt.data(), d,
                             got.data());
  // Against the output's scale: single elements can be sums of large terms that cancel.
  float worst = 0.0f, scale = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  CHECK(worst <= 1e-6f * scale);
  CHECK(got != base);

  // A decode-like step, every group small: each row equals that row run alone.
  const int64_t few = 12;
  std::vector<float> batch(few * H, 0.0f);
  k::MoeGroupedExpertsKMajor(x.data(), few, ids.data(), wts.data(), gut.data(), downt.data(), d,
                             batch.data());
  for (int64_t r = 0; r < few; ++r) {
    std::vector<float> alone(H, 0.0f);
    k::MoeGroupedExpertsKMajor(x.data() + r * H, 1, ids.data() + r * K, wts.data() + r * K,
                               gut.data(), downt.data(), d, alone.data());
    CHECK(std::memcmp(alone.data(), batch.data() + r * H, H * sizeof(float)) == 0);
  }
}

TEST_CASE("grouped experts skip picks of another rank's experts (negative ids), both layouts") {
  // Expert parallelism: a pick with id -1 adds nothing. The rank before this change ran such a
  // pick on one of its own experts with weight 0, which adds exactly zero: the same bits.
  const int64_t rows = 40, H = 72, I = 40, E = 6, K = 4;
  const auto x = Random(rows * H, 17), gu = Random(E * 2 * I * H, 18), down = Random(E * H * I, 19);
  std::vector<float> gut(gu.size()), downt(down.size());
  k::TransposeEachExpert(gu.data(), E, 2 * I, H, gut.data());
  k::TransposeEachExpert(down.data(), E, H, I, downt.data());
  std::vector<int32_t> ids(rows * K), zeroed(rows * K);
  std::vector<float> wts(rows * K), zero_wts(rows * K);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < K; ++j) {
      const int64_t i = r * K + j;
      // Row 3 has every pick remote; elsewhere every third pick is.
      const bool remote = r == 3 || i % 3 == 0;
      ids[i] = remote ? -1 : static_cast<int32_t>((r + j) % E);
      zeroed[i] = remote ? static_cast<int32_t>(i % E) : ids[i];
      wts[i] = 0.2f + 0.01f * static_cast<float>(i % 7);
      zero_wts[i] = remote ? 0.0f : wts[i];
    }
  const k::MoeExpertsDims d{H, I, E, K, 1.702f, 7.0f, 1.5f};
  const auto base = Random(rows * H, 20);
  for (const bool k_major : {false, true}) {
    CAPTURE(k_major);
    std::vector<float> skipped = base, weighted = base;
    if (k_major) {
      k::MoeGroupedExpertsKMajor(x.data(), rows, ids.data(), wts.data(), gut.data(), downt.data(),
                                 d, skipped.data());
      k::MoeGroupedExpertsKMajor(x.data(), rows, zeroed.data(), zero_wts.data(), gut.data(),
                                 downt.data(), d, weighted.data());
    } else {
      k::MoeGroupedExperts(x.data(), rows, ids.data(), wts.data(), gu.data(), down.data(), d,
                           skipped.data());
      k::MoeGroupedExperts(x.data(), rows, zeroed.data(), zero_wts.data(), gu.data(), down.data(),
                           d, weighted.data());
    }
    CHECK(std::memcmp(skipped.data(), weighted.data(), skipped.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(skipped.data() + 3 * H, base.data() + 3 * H, H * sizeof(float)) == 0);
    CHECK(skipped != base);
  }
}

}  // namespace
}  // namespace m3::test
