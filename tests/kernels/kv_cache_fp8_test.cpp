// The FP8 KV cache's CPU kernels (kernels/cpu/kv_cache_fp8.h) against float math: per (row,
// head) quantization into slots (each head its own scale, max|x| / 448, 1 for a zero head;
// half-ULP rounding bound; rows without a slot untouched), paged and block-sparse attention
// over FP8 pages equal to the float kernels over the same pages dequantized by the format's
// definition (bit for bit: one arithmetic), and close to, but not equal to, attention over the
// unquantized keys (e4m3's 2^-4 relative step); the fused QK norm + RoPE writing K / V by row.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/float8.h"
#include "kernels/cpu/kv_cache_fp8.h"
#include "kernels/cpu/msa_index_fp8.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/qk_norm_rope.h"

namespace m3::test {
namespace {

namespace k = m3::kernels::cpu;

std::vector<float> Normal(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double RelL2(const std::vector<float>& a, const std::vector<float>& b) {
  double n = 0, d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    n += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    d += double(b[i]) * b[i];
  }
  return std::sqrt(n / std::max(d, 1e-30));
}

TEST_CASE("FP8 KV: each (row, head) vector quantized at its slot with its own scale") {
  const int64_t rows = 4, heads = 3, dim = 32, slots_n = 10;
  std::vector<float> x = Normal(rows * heads * dim, 3, 2.0f);
  for (int64_t d = 0; d < dim; ++d) x[(1 * heads + 2) * dim + d] = 0.0f;     // row 1, head 2: zeros
  for (int64_t d = 0; d < dim; ++d) x[(2 * heads + 0) * dim + d] *= 100.0f;  // a large head
  const std::vector<int64_t> slots = {7, 2, -1, 5};
  std::vector<uint8_t> codes(slots_n * heads * dim, 0xaa);
  std::vector<float> scales(slots_n * heads, -5.0f);
  k::QuantizeKvRowsFp8(x.data(), rows, heads, dim, slots.data(), codes.data(), scales.data());
  for (int64_t r = 0; r < rows; ++r) {
    if (slots[r] < 0) continue;
    for (int64_t h = 0; h < heads; ++h) {
      const float* v = x.data() + (r * heads + h) * dim;
      float amax = 0.0f;
      for (int64_t d = 0; d < dim; ++d) amax = std::max(amax, std::fabs(v[d]));
      const int64_t at = slots[r] * heads + h;
      CHECK(scales[at] == (amax > 0.0f ? amax / 448.0f : 1.0f));
      std::vector<float> back(dim);
      k::DequantizeKvVectorFp8(codes.data() + at * dim, scales[at], dim, back.data());
      for (int64_t d = 0; d < dim; ++d) {
        CHECK(codes[at * dim + d] == k::F32ToE4M3(v[d] / scales[at]));
        CHECK(back[d] == k::E4M3ToF32(codes[at * dim + d]) * scales[at]);
        CHECK(std::fabs(back[d] - v[d]) <=
              std::max(std::fabs(v[d]) * 0.0625f, scales[at] * std::ldexp(1.0f, -10)) * 1.0001f);
      }
    }
  }
  // Row 2 had no slot: slots no row names keep their bytes.
  for (int64_t s : {0, 1, 3, 4, 6, 8, 9}) {
    CHECK(scales[s * heads] == -5.0f);
    CHECK(codes[s * heads * dim] == 0xaa);
  }
}

// Three sequences (a decode, two prefill chunks at offsets) over a shuffled page pool, every
// slot quantized.
struct Fp8Fixture {
  static constexpr int64_t kHq = 8, kHkv = 2, kD = 32, kPage = 4, kBlock = 8;
  std::vector<int32_t> ctx = {37, 0, 13}, rows = {1, 9, 6}, query_start = {0};
  std::vector<int32_t> tables;
  int64_t max_pages = 0, slots = 0, total_rows = 0;
  std::vector<float> k, v, q;  // float pages and queries
  std::vector<uint8_t> kc, vc;
  std::vector<float> ks, vs;
  std::vector<float> kd, vd;  // the codes dequantized by the format's definition

  Fp8Fixture() {
    for (int32_t r : rows) query_start.push_back(query_start.back() + r);
    total_rows = query_start.back();
    for (size_t s = 0; s < ctx.size(); ++s)
      max_pages = std::max<int64_t>(max_pages, (ctx[s] + rows[s] + kPage - 1) / kPage);
    const int64_t pool = 3 * max_pages + 2;
    std::vector<int32_t> order(pool);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(4));
    for (size_t s = 0, next = 0; s < ctx.size(); ++s) {
      const int64_t n = (ctx[s] + rows[s] + kPage - 1) / kPage;
      for (int64_t j = 0; j < max_pages; ++j) tables.push_back(j < n ? order[next++] : -1);
    }
    slots = pool * kPage;
    k = Normal(slots * kHkv * kD, 11);
    v = Normal(slots * kHkv * kD, 12);
    q = Normal(total_rows * kHq * kD, 13);
    kc.resize(k.size());
    vc.resize(v.size());
    ks.resize(slots * kHkv);
    vs.resize(slots * kHkv);
    std::vector<int64_t> all(slots);
    std::iota(all.begin(), all.end(), 0);
    k::QuantizeKvRowsFp8(k.data(), slots, kHkv, kD, all.data(), kc.data(), ks.data());
    k::QuantizeKvRowsFp8(v.data(), slots, kHkv, kD, all.data(), vc.data(), vs.data());
    kd.resize(k.size());
    vd.resize(v.size());
    for (size_t i = 0; i < k.size(); ++i) {
      kd[i] = k::E4M3ToF32(kc[i]) * ks[i / kD];
      vd[i] = k::E4M3ToF32(vc[i]) * vs[i / kD];
    }
  }
  k::PagedLayout Layout() const {
    return {3, query_start.data(), ctx.data(), tables.data(), max_pages, kPage};
  }
  k::Fp8KvPages Pages() const { return {kc.data(), ks.data(), vc.data(), vs.data()}; }
};

TEST_CASE("FP8 KV: paged attention equals float attention over the dequantized pages") {
  Fp8Fixture f;
  const k::AttentionDims dims{f.kHq, f.kHkv, f.kD, 0.2f};
  std::vector<float> got(f.q.size()), want(f.q.size()), exact(f.q.size());
  k::PagedAttention(f.q.data(), f.Pages(), f.Layout(), dims, got.data());
  k::PagedAttention(f.q.data(), f.kd.data(), f.vd.data(), f.Layout(), dims, want.data());
  k::PagedAttention(f.q.data(), f.k.data(), f.v.data(), f.Layout(), dims, exact.data());
  CHECK(got == want);
  const double err = RelL2(got, exact);
  MESSAGE("FP8 KV paged attention against unquantized keys: rel L2 " << err);
  CHECK(err > 0.0);  // the pages really are codes
  CHECK(err < 0.05);
}

TEST_CASE("FP8 KV: block-sparse attention equals float attention over the dequantized pages") {
  Fp8Fixture f;
  const k::AttentionDims dims{f.kHq, f.kHkv, f.kD, 0.2f};
  const int64_t topk = 3;
  std::mt19937 rng(8);
  std::vector<int32_t> sel(f.kHkv * f.total_rows * topk);
  for (int64_t g = 0; g < f.kHkv; ++g)
    for (int64_t s = 0; s < 3; ++s)
      for (int64_t r = f.query_start[s]; r < f.query_start[s + 1]; ++r) {
        const int32_t local = (f.ctx[s] + (r - f.query_start[s])) / f.kBlock;
        int32_t* o = sel.data() + (g * f.total_rows + r) * topk;
        o[0] = local;
        o[1] = static_cast<int32_t>(rng() % (local + 1));
        o[2] = rng() % 4 == 0 ? -1 : static_cast<int32_t>(rng() % (local + 1));
      }
  std::vector<float> got(f.q.size()), want(f.q.size()), exact(f.q.size());
  k::PagedBlockSparseAttention(f.q.data(), f.Pages(), f.Layout(), dims, sel.data(), topk, f.kBlock,
                               got.data());
  k::PagedBlockSparseAttention(f.q.data(), f.kd.data(), f.vd.data(), f.Layout(), dims, sel.data(),
                               topk, f.kBlock, want.data());
  k::PagedBlockSparseAttention(f.q.data(), f.k.data(), f.v.data(), f.Layout(), dims, sel.data(),
                               topk, f.kBlock, exact.data());
  CHECK(got == want);
  const double err = RelL2(got, exact);
  CHECK(err > 0.0);
  CHECK(err < 0.05);
}

TEST_CASE("fused QK norm + RoPE: kv_by_row writes each row's K and V densely") {
  const int64_t rows = 3, Hq = 4, Hkv = 2, D = 16, rot = 8, slots_n = 8;
  const int64_t width = (Hq + 2 * Hkv) * D, kw = Hkv * D;
  const std::vector<float> qkv = Normal(rows * width, 21);
  const std::vector<float> qn = Normal(D, 22, 0.3f), kn = Normal(D, 23, 0.3f);
  std::vector<float> cos(rows * rot), sin(rows * rot);
  for (int64_t i = 0; i < rows * rot; ++i) {
    cos[i] = std::cos(0.37f * static_cast<float>(i));
    sin[i] = std::sin(0.37f * static_cast<float>(i));
  }
  const std::vector<int64_t> slots = {5, 0, 6};
  k::QkNormRopeDims d{Hq, Hkv, D, rot, 0, 0, 0, 1e-6f};
  const k::QkNormWeightsPtr w{qn.data(), kn.data(), nullptr, nullptr};
  std::vector<float> q1(rows * Hq * D), q2(q1.size());
  std::vector<float> kp(slots_n * kw, 0.0f), vp(slots_n * kw, 0.0f);
  std::vector<float> kr(rows * kw), vr(rows * kw);
  k::QkNormRopeToPages(qkv.data(), rows, d, w, cos.data(), sin.data(), slots.data(), q1.data(),
                       nullptr, kp.data(), vp.data(), nullptr);
  d.kv_by_row = true;
  k::QkNormRopeToPages(qkv.data(), rows, d, w, cos.data(), sin.data(), slots.data(), q2.data(),
                       nullptr, kr.data(), vr.data(), nullptr);
  CHECK(q1 == q2);
  for (int64_t r = 0; r < rows; ++r) {
    CHECK(std::equal(kr.begin() + r * kw, kr.begin() + (r + 1) * kw, kp.begin() + slots[r] * kw));
    CHECK(std::equal(vr.begin() + r * kw, vr.begin() + (r + 1) * kw, vp.begin() + slots[r] * kw));
  }
}

}  // namespace
}  // namespace m3::test
