// CPU reference ops against naive formulas written out in the tests: RMSNorm, LayerNorm, GELU,
// SwiGLU-OAI, RoPE, Linear, dense and block-sparse attention, MoE routing.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/block_sparse_attention.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

namespace k = m3::kernels::cpu;

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST_CASE("RmsNormGemma scales by (1 + w)") {
  auto x = Random(3 * 8, 1), w = Random(8, 2);
  std::vector<float> y(x.size());
  k::RmsNormGemma(x.data(), 3, 8, w.data(), 1e-6f, y.data());
  for (int r = 0; r < 3; ++r) {
    double ss = 0;
    for (int i = 0; i < 8; ++i) ss += x[r * 8 + i] * x[r * 8 + i];
    double inv = 1.0 / std::sqrt(ss / 8 + 1e-6);
    for (int i = 0; i < 8; ++i)
      CHECK(y[r * 8 + i] == doctest::Approx(x[r * 8 + i] * inv * (1 + w[i])).epsilon(1e-5));
  }
}

TEST_CASE("LayerNorm, GELU, SwiGLU-OAI") {
  auto x = Random(16, 3), w = Random(16, 4), b = Random(16, 5);
  std::vector<float> y(16);
  k::LayerNorm(x.data(), 1, 16, w.data(), b.data(), 1e-5f, y.data());
  double mean = 0, var = 0;
  for (float v : x) mean += v / 16;
  for (float v : x) var += (v - mean) * (v - mean) / 16;
  for (int i = 0; i < 16; ++i)
    CHECK(y[i] ==
          doctest::Approx((x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i]).epsilon(1e-5));

  std::vector<float> g = {-3.0f, -0.5f, 0.0f, 1.0f, 4.0f};
  k::GeluErf(g.data(), 5);
  CHECK(g[2] == 0.0f);
  CHECK(g[3] == doctest::Approx(0.8413447f));
  CHECK(g[0] == doctest::Approx(-0.0040496f).epsilon(1e-4));

  // gate clamped from above only, up clamped both ways, limit 2, alpha 1.702
  std::vector<float> gate = {-5.0f, 3.0f, 0.5f}, up = {-9.0f, 9.0f, 0.25f}, out(3);
  k::SwigluOai(gate.data(), up.data(), 1, 3, 3, 1.702f, 2.0f, out.data());
  auto ref = [](float g, float u) {
    g = std::min(g, 2.0f);
    u = std::max(-2.0f, std::min(u, 2.0f));
    return (u + 1) * g / (1 + std::exp(-1.702f * g));
  };
  for (int i = 0; i < 3; ++i) CHECK(out[i] == doctest::Approx(ref(gate[i], up[i])));
  CHECK(out[0] == doctest::Approx(-1.0f * -5.0f / (1 + std::exp(1.702f * 5.0f))));
}

TEST_CASE("RoPE rotates the first rot channels in rotate-half order") {
  const int D = 10, rot = 6;
  auto inv = k::RopeInverseFrequencies(rot, 10000.0);
  REQUIRE(inv.size() == 3);
  CHECK(inv[1] == doctest::Approx(std::pow(10000.0, -2.0 / 6)));
  std::vector<float> cos(rot), sin(rot);
  k::RopeCosSin(5, inv, cos.data(), sin.data());
  auto x = Random(2 * D, 6);
  auto y = x;
  k::ApplyRotaryHalf(y.data(), 2, D, rot, cos.data(), sin.data());
  for (int h = 0; h < 2; ++h) {
    const float* a = x.data() + h * D;
    const float* o = y.data() + h * D;
    for (int i = 0; i < 3; ++i) {
      double th = 5.0 * inv[i];
      CHECK(o[i] == doctest::Approx(a[i] * std::cos(th) - a[i + 3] * std::sin(th)).epsilon(1e-5));
      CHECK(o[i + 3] ==
            doctest::Approx(a[i + 3] * std::cos(th) + a[i] * std::sin(th)).epsilon(1e-5));
    }
    for (int i = rot; i < D; ++i) CHECK(o[i] == a[i]);
  }
}

TEST_CASE("Linear matches a naive product") {
  const int M = 7, K = 13, N = 5;
  auto x = Random(M * K, 7), w = Random(N * K, 8), b = Random(N, 9);
  std::vector<float> y(M * N), ref(M * N);
  k::Linear(x.data(), M, K, w.data(), N, b.data(), y.data());
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = b[j];
      for (int t = 0; t < K; ++t) s += double(x[i * K + t]) * w[j * K + t];
      ref[i * N + j] = float(s);
    }
  CHECK(RelativeL2(y, ref) < 1e-6);
}

// Naive attention with an explicit allow(query, head, key) predicate.
template <typename Allow>
std::vector<float> NaiveAttention(const std::vector<float>& q, const std::vector<float>& kk,
                                  const std::vector<float>& v, int tq, int tk, int hq, int hkv,
                                  int d, Allow allow) {
  std::vector<float> out(tq * hq * d, 0.0f);
  for (int i = 0; i < tq; ++i)
    for (int h = 0; h < hq; ++h) {
      int g = h / (hq / hkv);
      std::vector<double> s(tk, -INFINITY);
      double mx = -INFINITY;
      for (int j = 0; j < tk; ++j) {
        if (!allow(i, g, j)) continue;
        double dot = 0;
        for (int c = 0; c < d; ++c)
          dot += double(q[(i * hq + h) * d + c]) * kk[(j * hkv + g) * d + c];
        s[j] = dot / std::sqrt(double(d));
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int j = 0; j < tk; ++j) sum += std::isinf(s[j]) ? 0 : std::exp(s[j] - mx);
      for (int j = 0; j < tk; ++j) {
        if (std::isinf(s[j])) continue;
        double p = std::exp(s[j] - mx) / sum;
        for (int c = 0; c < d; ++c)
          out[(i * hq + h) * d + c] += float(p * v[(j * hkv + g) * d + c]);
      }
    }
  return out;
}

TEST_CASE("dense causal GQA attention with a query offset (decode-like)") {
  const int tq = 3, tk = 9, hq = 4, hkv = 2, d = 8;
  auto q = Random(tq * hq * d, 10), kk = Random(tk * hkv * d, 11), v = Random(tk * hkv * d, 12);
  std::vector<int64_t> pos = {6, 7, 8};
  std::vector<float> out(tq * hq * d);
  k::AttentionDims dims{hq, hkv, d, float(1 / std::sqrt(8.0))};
  k::Attention(q.data(), tq, kk.data(), v.data(), tk, dims, true, pos.data(), out.data());
  auto ref =
      NaiveAttention(q, kk, v, tq, tk, hq, hkv, d, [&](int i, int, int j) { return j <= pos[i]; });
  CHECK(RelativeL2(out, ref) < 1e-5);
}

TEST_CASE("block-sparse attention keeps selected blocks, causal, per KV group") {
  const int tq = 10, tk = 10, hq = 4, hkv = 2, d = 4, bs = 3, topk = 2;
  auto q = Random(tq * hq * d, 13), kk = Random(tk * hkv * d, 14), v = Random(tk * hkv * d, 15);
  std::vector<int64_t> pos(tq);
  for (int i = 0; i < tq; ++i) pos[i] = i;
  // [hkv, tq, topk]; group 0 keeps its own block + block 0, group 1 only its own block.
  std::vector<int64_t> sel(hkv * tq * topk);
  for (int i = 0; i < tq; ++i) {
    sel[(0 * tq + i) * topk + 0] = i / bs;
    sel[(0 * tq + i) * topk + 1] = i / bs == 0 ? -1 : 0;
    sel[(1 * tq + i) * topk + 0] = -1;
    sel[(1 * tq + i) * topk + 1] = i / bs;
  }
  std::vector<float> out(tq * hq * d);
  k::AttentionDims dims{hq, hkv, d, 0.5f};
  k::BlockSparseAttention(q.data(), tq, kk.data(), v.data(), tk, dims, pos.data(), sel.data(), topk,
                          bs, out.data());
  auto ref = NaiveAttention(q, kk, v, tq, tk, hq, hkv, d, [&](int i, int g, int j) {
    if (j > i) return false;
    for (int s = 0; s < topk; ++s)
      if (sel[(g * tq + i) * topk + s] == j / bs) return true;
    return false;
  });
  CHECK(RelativeL2(out, ref) < 1e-5);
}

TEST_CASE("MoE routing: choice by biased sigmoid, weights from unbiased scores") {
  // 4 experts; the bias flips the choice from expert 0 to expert 3.
  std::vector<float> logits = {2.0f, 1.0f, -1.0f, 0.5f};
  std::vector<float> bias = {0.0f, 0.0f, 0.0f, 0.5f};
  std::vector<int64_t> ids(2);
  std::vector<float> w(2);
  k::MoeRouteSigmoid(logits.data(), 1, 4, bias.data(), 2, ids.data(), w.data());
  auto sig = [](float x) { return 1 / (1 + std::exp(-x)); };
  // choice scores: 0.881, 0.731, 0.269, 0.622 + 0.5 = 1.122 -> experts 3, 0
  CHECK(ids[0] == 3);
  CHECK(ids[1] == 0);
  CHECK(w[0] == doctest::Approx(sig(0.5f) / (sig(0.5f) + sig(2.0f))));
  CHECK(w[0] + w[1] == doctest::Approx(1.0f));
}

TEST_CASE("MoE routing for one rank of an expert-parallel group: local ids, -1 for the others") {
  std::vector<float> logits = {2.0f, 1.0f, -1.0f, 0.5f};
  std::vector<float> bias = {0.0f, 0.0f, 0.0f, 0.5f};
  std::vector<int64_t> all(2), ids(2);
  std::vector<float> w_all(2), w(2);
  k::MoeRouteSigmoid(logits.data(), 1, 4, bias.data(), 2, all.data(), w_all.data());
  // Experts 2 and 3 on this rank: 3 is local 1, 0 is another rank's.
  k::MoeRouteSigmoid(logits.data(), 1, 4, bias.data(), 2, ids.data(), w.data(), 2, 2);
  CHECK(all == std::vector<int64_t>{3, 0});
  CHECK(ids == std::vector<int64_t>{1, -1});
  CHECK(w == w_all);  // weights normalized over every chosen expert, wherever it runs
  k::MoeRouteSigmoid(logits.data(), 1, 4, bias.data(), 2, ids.data(), w.data(), 0, 2);
  CHECK(ids == std::vector<int64_t>{-1, 0});
}

}  // namespace
}  // namespace m3::test
