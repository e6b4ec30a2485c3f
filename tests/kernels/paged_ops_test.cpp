// The batched / paged CPU kernels against the contiguous one-sequence kernels they twin: paged
// attention, the paged MSA indexer and block-sparse attention over pages (three sequences with
// different contexts, pages from a shuffled pool), the fused QK norm + RoPE writing into pages,
// grouped MoE experts against a per-token loop, and segment attention against per-segment
// dense attention.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/block_sparse_attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_experts.h"
#include "kernels/cpu/msa_indexer.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/paged_msa_indexer.h"
#include "kernels/cpu/qk_norm_rope.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/segment_attention.h"
#include "kernels/cpu/swiglu.h"

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

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Three sequences (a decode, two prefill chunks at offsets) over a shuffled page pool.
struct PagedFixture {
  static constexpr int64_t kHq = 4, kHkv = 2, kD = 8, kDi = 4, kPage = 2, kBlock = 4;
  std::vector<int32_t> ctx = {13, 0, 6}, rows = {1, 7, 5};
  std::vector<int32_t> query_start = {0};
  int64_t max_pages = 0;
  std::vector<int32_t> block_tables;
  std::vector<std::vector<float>> k, v, ik;  // contiguous per sequence
  std::vector<float> k_pages, v_pages, ik_pages;
  std::vector<float> q, iq;  // [rows, ...] of the batch
  int64_t total_rows = 0;

  PagedFixture() {
    const int64_t seqs = 3;
    for (int64_t s = 0; s < seqs; ++s) query_start.push_back(query_start.back() + rows[s]);
    total_rows = query_start.back();
    for (int64_t s = 0; s < seqs; ++s)
      max_pages = std::max<int64_t>(max_pages, (ctx[s] + rows[s] + kPage - 1) / kPage);
    const int64_t pool = seqs * max_pages + 3;
    std::vector<int32_t> free(pool);
    std::iota(free.begin(), free.end(), 0);
    std::shuffle(free.begin(), free.end(), std::mt19937(5));
    k_pages = Random(pool * kPage * kHkv * kD, 90);  // garbage where no sequence writes
    v_pages = Random(pool * kPage * kHkv * kD, 91);
    ik_pages = Random(pool * kPage * kDi, 92);
    for (int64_t s = 0; s < seqs; ++s) {
      const int64_t len = ctx[s] + rows[s], pages = (len + kPage - 1) / kPage;
      k.push_back(Random(len * kHkv * kD, 10 + s));
      v.push_back(Random(len * kHkv * kD, 20 + s));
      ik.push_back(Random(len * kDi, 30 + s));
      for (int64_t j = 0; j < max_pages; ++j) {
        block_tables.push_back(j < pages ? free.back() : -1);
        if (j < pages) free.pop_back();
      }
      for (int64_t p = 0; p < len; ++p) {
        const int64_t slot = block_tables[s * max_pages + p / kPage] * kPage + p % kPage;
        std::copy_n(k[s].data() + p * kHkv * kD, kHkv * kD, k_pages.data() + slot * kHkv * kD);
        std::copy_n(v[s].data() + p * kHkv * kD, kHkv * kD, v_pages.data() + slot * kHkv * kD);
        std::copy_n(ik[s].data() + p * kDi, kDi, ik_pages.data() + slot * kDi);
      }
    }
    q = Random(total_rows * kHq * kD, 40);
    iq = Random(total_rows * kHkv * kDi, 41);
  }
  k::PagedLayout Layout() const {
    return {3, query_start.data(), ctx.data(), block_tables.data(), max_pages, kPage};
  }
  std::vector<int64_t> Positions(int64_t s) const {
    std::vector<int64_t> p(rows[s]);
    for (int64_t i = 0; i < rows[s]; ++i) p[i] = ctx[s] + i;
    return p;
  }
};

TEST_CASE("paged attention equals dense causal attention per sequence") {
  PagedFixture f;
  k::AttentionDims dims{f.kHq, f.kHkv, f.kD, 0.35f};
  std::vector<float> out(f.q.size());
  k::PagedAttention(f.q.data(), f.k_pages.data(), f.v_pages.data(), f.Layout(), dims, out.data());
  const int64_t w = f.kHq * f.kD;
  for (int64_t s = 0; s < 3; ++s) {
    std::vector<float> want(f.rows[s] * w);
    auto pos = f.Positions(s);
    k::Attention(f.q.data() + f.query_start[s] * w, f.rows[s], f.k[s].data(), f.v[s].data(),
                 f.ctx[s] + f.rows[s], dims, true, pos.data(), want.data());
    std::vector<float> got(out.begin() + f.query_start[s] * w,
                           out.begin() + f.query_start[s + 1] * w);
    CHECK(MaxAbsDiff(got, want) == 0.0f);
  }
}

TEST_CASE("paged MSA indexer and block-sparse attention equal the contiguous kernels") {
  PagedFixture f;
  const int64_t topk = 2;
  k::IndexerParams ip{f.kHkv, f.kDi, f.kBlock, topk, 1};
  std::vector<int32_t> sel(f.kHkv * f.total_rows * topk);
  k::PagedIndexerSelectBlocks(f.iq.data(), f.ik_pages.data(), f.Layout(), ip, sel.data());
  k::AttentionDims dims{f.kHq, f.kHkv, f.kD, 0.35f};
  std::vector<float> out(f.q.size());
  k::PagedBlockSparseAttention(f.q.data(), f.k_pages.data(), f.v_pages.data(), f.Layout(), dims,
                               sel.data(), topk, f.kBlock, out.data());
  const int64_t w = f.kHq * f.kD;
  for (int64_t s = 0; s < 3; ++s) {
    const int64_t tq = f.rows[s], tk = f.ctx[s] + f.rows[s], q0 = f.query_start[s];
    auto pos = f.Positions(s);
    const int64_t slots = k::IndexerSlots(ip, tk);
    std::vector<int64_t> want(f.kHkv * tq * slots);
    k::IndexerSelectBlocks(f.iq.data() + q0 * f.kHkv * f.kDi, tq, f.ik[s].data(), tk, pos.data(),
                           ip, want.data());
    for (int64_t h = 0; h < f.kHkv; ++h)
      for (int64_t i = 0; i < tq; ++i) {
        std::set<int64_t> a, b;
        for (int64_t j = 0; j < topk; ++j)
          if (int32_t x = sel[(h * f.total_rows + q0 + i) * topk + j]; x >= 0) a.insert(x);
        for (int64_t j = 0; j < slots; ++j)
          if (int64_t x = want[(h * tq + i) * slots + j]; x >= 0) b.insert(x);
        INFO("seq " << s << " head " << h << " row " << i);
        CHECK(a == b);
        CHECK(a.count(pos[i] / f.kBlock) == 1);  // the local block is always in
      }
    std::vector<float> dense_out(tq * w);
    k::BlockSparseAttention(f.q.data() + q0 * w, tq, f.k[s].data(), f.v[s].data(), tk, dims,
                            pos.data(), want.data(), slots, f.kBlock, dense_out.data());
    std::vector<float> got(out.begin() + q0 * w, out.begin() + (q0 + tq) * w);
    CHECK(MaxAbsDiff(got, dense_out) == 0.0f);
  }
}

TEST_CASE("fused QK norm + RoPE writes the same q, k, v and index key as the separate steps") {
  const int64_t rows = 3, Hq = 4, Hkv = 2, D = 8, rot = 4, Hi = 2, Di = 4, irot = 4;
  k::QkNormRopeDims d{Hq, Hkv, D, rot, Hi, Di, irot, 1e-6f};
  const int64_t width = (Hq + 2 * Hkv) * D + (Hi + 1) * Di;
  auto qkv = Random(rows * width, 1);
  auto qn = Random(D, 2), kn = Random(D, 3), iqn = Random(Di, 4), ikn = Random(Di, 5);
  auto inv = k::RopeInverseFrequencies(rot, 10000.0);
  std::vector<float> cos(rows * rot), sin(rows * rot);
  for (int64_t r = 0; r < rows; ++r)
    k::RopeCosSin(r + 7, inv, cos.data() + r * rot, sin.data() + r * rot);
  const std::vector<int64_t> slots = {5, 0, 3};
  std::vector<float> q(rows * Hq * D), iq(rows * Hi * Di), kp(6 * Hkv * D), vp(6 * Hkv * D),
      ikp(6 * Di);
  k::QkNormRopeToPages(qkv.data(), rows, d, {qn.data(), kn.data(), iqn.data(), ikn.data()},
                       cos.data(), sin.data(), slots.data(), q.data(), iq.data(), kp.data(),
                       vp.data(), ikp.data());
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = qkv.data() + r * width;
    std::vector<float> wq(Hq * D), wk(Hkv * D), wiq(Hi * Di), wik(Di);
    k::RmsNormGemma(row, Hq, D, qn.data(), 1e-6f, wq.data());
    k::ApplyRotaryHalf(wq.data(), Hq, D, rot, cos.data() + r * rot, sin.data() + r * rot);
    k::RmsNormGemma(row + Hq * D, Hkv, D, kn.data(), 1e-6f, wk.data());
    k::ApplyRotaryHalf(wk.data(), Hkv, D, rot, cos.data() + r * rot, sin.data() + r * rot);
    k::RmsNormGemma(row + (Hq + 2 * Hkv) * D, Hi, Di, iqn.data(), 1e-6f, wiq.data());
    k::ApplyRotaryHalf(wiq.data(), Hi, Di, irot, cos.data() + r * rot, sin.data() + r * rot);
    k::RmsNormGemma(row + (Hq + 2 * Hkv) * D + Hi * Di, 1, Di, ikn.data(), 1e-6f, wik.data());
    k::ApplyRotaryHalf(wik.data(), 1, Di, irot, cos.data() + r * rot, sin.data() + r * rot);
    const int64_t s = slots[r];
    CHECK(std::equal(wq.begin(), wq.end(), q.begin() + r * Hq * D));
    CHECK(std::equal(wk.begin(), wk.end(), kp.begin() + s * Hkv * D));
    CHECK(std::equal(row + (Hq + Hkv) * D, row + (Hq + 2 * Hkv) * D, vp.begin() + s * Hkv * D));
    CHECK(std::equal(wiq.begin(), wiq.end(), iq.begin() + r * Hi * Di));
    CHECK(std::equal(wik.begin(), wik.end(), ikp.begin() + s * Di));
  }
}

TEST_CASE("grouped MoE experts equal a per-token loop over the chosen experts") {
  const int64_t rows = 9, H = 6, I = 5, E = 4, K = 2;
  auto x = Random(rows * H, 1), gu = Random(E * 2 * I * H, 2), down = Random(E * H * I, 3);
  std::vector<int32_t> ids(rows * K);
  std::vector<float> wts(rows * K);
  std::mt19937 rng(4);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> e(E);
    std::iota(e.begin(), e.end(), 0);
    std::shuffle(e.begin(), e.end(), rng);
    for (int64_t j = 0; j < K; ++j) {
      ids[r * K + j] = e[j];
      wts[r * K + j] = 0.3f + 0.4f * static_cast<float>(j);
    }
  }
  auto base = Random(rows * H, 5);
  std::vector<float> out = base;
  k::MoeExpertsDims d{H, I, E, K, 1.702f, 7.0f, 1.5f};
  k::MoeGroupedExperts(x.data(), rows, ids.data(), wts.data(), gu.data(), down.data(), d,
                       out.data());
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> routed(H, 0.0f);
    for (int64_t j = 0; j < K; ++j) {
      const int64_t e = ids[r * K + j];
      std::vector<float> g(2 * I), a(I), y(H);
      k::Linear(x.data() + r * H, 1, H, gu.data() + e * 2 * I * H, 2 * I, nullptr, g.data());
      k::SwigluOai(g.data(), g.data() + I, 1, I, 2 * I, 1.702f, 7.0f, a.data());
      k::Linear(a.data(), 1, I, down.data() + e * H * I, H, nullptr, y.data());
      for (int64_t c = 0; c < H; ++c) routed[c] += y[c] * wts[r * K + j];
    }
    for (int64_t c = 0; c < H; ++c)
      CHECK(out[r * H + c] == doctest::Approx(routed[c] * 1.5f + base[r * H + c]).epsilon(1e-5));
  }
}

TEST_CASE("segment attention equals dense non-causal attention within each segment") {
  const int64_t rows = 10, heads = 2, hd = 6, rot = 4;
  const std::vector<int64_t> segments = {0, 4, 10};
  auto qkv = Random(rows * 3 * heads * hd, 1);
  auto cos = Random(rows * rot, 2), sin = Random(rows * rot, 3);
  std::vector<float> q(rows * heads * hd), kk(q.size()), vv(q.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = qkv.data() + r * 3 * heads * hd;
    std::copy_n(row, heads * hd, q.data() + r * heads * hd);
    std::copy_n(row + heads * hd, heads * hd, kk.data() + r * heads * hd);
    std::copy_n(row + 2 * heads * hd, heads * hd, vv.data() + r * heads * hd);
    k::ApplyRotaryHalf(q.data() + r * heads * hd, heads, hd, rot, cos.data() + r * rot,
                       sin.data() + r * rot);
    k::ApplyRotaryHalf(kk.data() + r * heads * hd, heads, hd, rot, cos.data() + r * rot,
                       sin.data() + r * rot);
  }
  std::vector<float> out(rows * heads * hd);
  k::SegmentAttention(qkv.data(), rows, heads, hd, cos.data(), sin.data(), rot, segments.data(), 2,
                      out.data());
  k::AttentionDims dims{heads, heads, hd, static_cast<float>(1.0 / std::sqrt(double(hd)))};
  for (size_t s = 0; s + 1 < segments.size(); ++s) {
    const int64_t b = segments[s], n = segments[s + 1] - b, w = heads * hd;
    std::vector<float> want(n * w);
    k::Attention(q.data() + b * w, n, kk.data() + b * w, vv.data() + b * w, n, dims, false, nullptr,
                 want.data());
    std::vector<float> got(out.begin() + b * w, out.begin() + (b + n) * w);
    CHECK(MaxAbsDiff(got, want) == 0.0f);
  }
}

}  // namespace
}  // namespace m3::test
