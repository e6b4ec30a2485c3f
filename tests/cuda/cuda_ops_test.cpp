// Each op of the CUDA backend (so each kernels/cuda kernel) against its CPU twin on the same
// random inputs, rounded to bf16 first so both see identical numbers, at the real model's
// shapes (hidden 6144, 64 query / 4 KV heads of 128, rotary 64, index 4 x 128, MSA block 128,
// top-16, 1 local block; experts of 3072 (8 of them here: the CPU twin is the slow side), top-4;
// vision 1280 wide, 16 heads of 80) and contexts up to 32K. Outputs are compared by relative L2
// (bf16 storage: ~4e-3 per rounding); MSA block selections must be equal except where the two
// blocks' scores are within rounding of each other (near-ties, counted and printed). The
// attention ops also run on the FP8 KV cache (e4m3 K/V codes with per-vector scales).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend/cpu/cpu_device.h"
#include "engine/backend/make_device.h"
#include "engine/backend/make_m3_ops.h"
#include "engine/backend/step_metadata_upload.h"
#include "kernels/cpu/kv_cache_fp8.h"
#include "kernels/cpu/rope.h"
#include "shared/dtype.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::ForwardBatch;
using engine::backend::Device;
using engine::backend::DeviceTensor;
using engine::backend::M3Ops;

constexpr double kTol = 1e-2;

struct Backends {
  std::unique_ptr<Device> cpu = engine::backend::MakeCpuDevice();
  std::unique_ptr<Device> gpu = engine::backend::MakeDevice("cuda");
  std::unique_ptr<M3Ops> cpu_ops = engine::backend::MakeM3Ops(*cpu);
  std::unique_ptr<M3Ops> gpu_ops = engine::backend::MakeM3Ops(*gpu);
};

Backends& Both() {
  static Backends b;
  return b;
}

// Uniform in [-scale, scale], rounded to bf16.
std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = BF16ToF32(F32ToBF16(u(rng)));
  return v;
}

// One tensor on both backends: float32 on the CPU, the activation dtype on the GPU.
struct Twin {
  DeviceTensor cpu, gpu;
};

Twin Act(const std::vector<float>& host, Shape shape, DType gpu_dtype = DType::kBF16) {
  Twin t{Both().cpu->Alloc(DType::kF32, shape), Both().gpu->Alloc(gpu_dtype, shape)};
  Both().cpu->Upload(host.data(), t.cpu);
  Both().gpu->Upload(host.data(), t.gpu);
  return t;
}
Twin Ints(const std::vector<int32_t>& host, Shape shape) {
  Twin t{Both().cpu->Alloc(DType::kI32, shape), Both().gpu->Alloc(DType::kI32, shape)};
  Both().cpu->Upload(host.data(), t.cpu);
  Both().gpu->Upload(host.data(), t.gpu);
  return t;
}
Twin Weight(const std::vector<float>& host, Shape shape) {
  TensorView v{DType::kF32, shape, reinterpret_cast<const uint8_t*>(host.data()), host.size() * 4};
  return {Both().cpu->UploadWeight({&v, 1}, shape), Both().gpu->UploadWeight({&v, 1}, shape)};
}

std::vector<float> Get(Device& b, const DeviceTensor& t) {
  std::vector<float> v(t.numel());
  b.Download(t, v.data());
  return v;
}
std::vector<int32_t> GetInts(Device& b, const DeviceTensor& t) {
  std::vector<int32_t> v(t.numel());
  b.Download(t, v.data());
  return v;
}

double Compare(const char* what, const Twin& t) {
  const double e = RelativeL2(Get(*Both().gpu, t.gpu), Get(*Both().cpu, t.cpu));
  std::printf("  %-44s rel L2 %.3e\n", what, e);
  return e;
}

TEST_CASE("elementwise, norms and GEMMs match the CPU twins") {
  Backends& b = Both();
  const int64_t rows = 7, H = 6144, I = 3072, Dv = 1280;
  // add + RMSNorm (Gemma) with and without a delta
  Twin res = Act(Random(rows * H, 1, 4.0f), {rows, H}), delta = Act(Random(rows * H, 2), {rows, H});
  Twin out = Act(std::vector<float>(rows * H), {rows, H});
  Twin w = Weight(Random(H, 3, 0.5f), {H});
  for (M3Ops* be : {b.cpu_ops.get(), b.gpu_ops.get()}) {
    const bool g = be == b.gpu_ops.get();
    be->AddRmsNorm(g ? res.gpu : res.cpu, g ? &delta.gpu : &delta.cpu, g ? w.gpu : w.cpu, 1e-6f,
                   g ? out.gpu : out.cpu);
  }
  CHECK(Compare("AddRmsNorm residual", res) < kTol);
  CHECK(Compare("AddRmsNorm out", out) < kTol);
  b.cpu_ops->AddRmsNorm(res.cpu, nullptr, w.cpu, 1e-6f, out.cpu);
  b.gpu_ops->AddRmsNorm(res.gpu, nullptr, w.gpu, 1e-6f, out.gpu);
  CHECK(Compare("RmsNorm (no delta)", out) < kTol);
  // Widths the register-held vector kernel does not take (not a multiple of 8, above 8192).
  for (int64_t width : {1000 + 4, 12288}) {
    Twin r2 = Act(Random(3 * width, 20, 4.0f), {3, width}),
         d3 = Act(Random(3 * width, 21), {3, width});
    Twin o2 = Act(std::vector<float>(3 * width), {3, width});
    Twin w2 = Weight(Random(width, 22, 0.5f), {width});
    b.cpu_ops->AddRmsNorm(r2.cpu, &d3.cpu, w2.cpu, 1e-6f, o2.cpu);
    b.gpu_ops->AddRmsNorm(r2.gpu, &d3.gpu, w2.gpu, 1e-6f, o2.gpu);
    CHECK(Compare(("AddRmsNorm width " + std::to_string(width)).c_str(), o2) < kTol);
  }

  // LayerNorm in place, GELU, Add at the vision width
  Twin x = Act(Random(rows * Dv, 4, 3.0f), {rows, Dv});
  Twin lw = Weight(Random(Dv, 5), {Dv}), lb = Weight(Random(Dv, 6), {Dv});
  b.cpu_ops->LayerNorm(x.cpu, lw.cpu, lb.cpu, 1e-6f, x.cpu);
  b.gpu_ops->LayerNorm(x.gpu, lw.gpu, lb.gpu, 1e-6f, x.gpu);
  CHECK(Compare("LayerNorm (in place)", x) < kTol);
  b.cpu_ops->Gelu(x.cpu);
  b.gpu_ops->Gelu(x.gpu);
  CHECK(Compare("Gelu", x) < kTol);
  Twin d2 = Act(Random(rows * Dv, 7), {rows, Dv});
  b.cpu_ops->Add(x.cpu, d2.cpu);
  b.gpu_ops->Add(x.gpu, d2.gpu);
  CHECK(Compare("Add", x) < kTol);

  // SwiGLU-OAI at the expert width (values beyond the clamp limit included)
  Twin gu = Act(Random(rows * 2 * I, 8, 9.0f), {rows, 2 * I});
  Twin act = Act(std::vector<float>(rows * I), {rows, I});
  engine::backend::SwigluParams sp{1.702f, 7.0f};
  b.cpu_ops->SwigluOai(gu.cpu, sp, act.cpu);
  b.gpu_ops->SwigluOai(gu.gpu, sp, act.gpu);
  CHECK(Compare("SwigluOai", act) < kTol);

  // Linear: bf16 output with a bias (vision qkv), f32 output (router, logits)
  const int64_t M = 33;
  Twin vx = Act(Random(M * Dv, 9), {M, Dv});
  Twin vw = Weight(Random(3 * Dv * Dv, 10, 0.05f), {3 * Dv, Dv});
  Twin vb = Weight(Random(3 * Dv, 11), {3 * Dv});
  Twin vy = Act(std::vector<float>(M * 3 * Dv), {M, 3 * Dv});
  b.cpu_ops->Linear(vx.cpu, vw.cpu, &vb.cpu, vy.cpu);
  b.gpu_ops->Linear(vx.gpu, vw.gpu, &vb.gpu, vy.gpu);
  CHECK(Compare("Linear 33x1280 -> 3840 + bias (bf16 out)", vy) < kTol);
  Twin hx = Act(Random(5 * H, 12), {5, H});
  Twin rw = Weight(Random(128 * H, 13, 0.05f), {128, H});
  Twin ry = Act(std::vector<float>(5 * 128), {5, 128}, DType::kF32);
  b.cpu_ops->Linear(hx.cpu, rw.cpu, nullptr, ry.cpu);
  b.gpu_ops->Linear(hx.gpu, rw.gpu, nullptr, ry.gpu);
  CHECK(Compare("Linear 5x6144 -> 128 (f32 out)", ry) < kTol);
  // Decode-sized rows take the GEMV kernels: few outputs (k split over a block's warps) and many.
  for (int64_t m : {1, 3, 4}) {
    for (int64_t n : {128, 700}) {
      Twin gx = Act(Random(m * H, 30 + m, 1.0f), {m, H});
      Twin gw = Weight(Random(n * H, 40 + n, 0.05f), {n, H});
      Twin gy = Act(std::vector<float>(m * n), {m, n}, m == 3 ? DType::kBF16 : DType::kF32);
      b.cpu_ops->Linear(gx.cpu, gw.cpu, nullptr, gy.cpu);
      b.gpu_ops->Linear(gx.gpu, gw.gpu, nullptr, gy.gpu);
      const std::string what = "GEMV " + std::to_string(m) + "x6144 -> " + std::to_string(n);
      CHECK(Compare(what.c_str(), gy) < kTol);
    }
  }

  // Embedding, GatherRows, CopyRows
  Twin table = Weight(Random(1000 * H, 14), {1000, H});
  Twin ids = Ints({5, 999, 0, 5, 17}, {5});
  Twin emb = Act(std::vector<float>(5 * H), {5, H});
  b.cpu_ops->Embedding(table.cpu, ids.cpu, emb.cpu);
  b.gpu_ops->Embedding(table.gpu, ids.gpu, emb.gpu);
  CHECK(Compare("Embedding", emb) == 0.0);
  Twin narrow = Weight(Random(10 * 3, 15), {10, 3});  // rows of 6 bytes: the 2-byte copy
  Twin nemb = Act(std::vector<float>(5 * 3), {5, 3});
  Twin nids = Ints({9, 0, 3, 3, 1}, {5});
  b.cpu_ops->Embedding(narrow.cpu, nids.cpu, nemb.cpu);
  b.gpu_ops->Embedding(narrow.gpu, nids.gpu, nemb.gpu);
  CHECK(Compare("Embedding, 3 wide", nemb) == 0.0);
  Twin picked = Act(std::vector<float>(2 * H), {2, H});
  Twin idx = Ints({4, 1}, {2});
  b.cpu_ops->GatherRows(emb.cpu, idx.cpu, picked.cpu);
  b.gpu_ops->GatherRows(emb.gpu, idx.gpu, picked.gpu);
  CHECK(Compare("GatherRows", picked) == 0.0);
  b.cpu_ops->CopyRows(picked.cpu, 1, emb.cpu, 3, 1);
  b.gpu_ops->CopyRows(picked.gpu, 1, emb.gpu, 3, 1);
  CHECK(Compare("CopyRows", emb) == 0.0);
}

// A step over several sequences with long cached contexts: decodes (one at 32K), a prefill chunk
// at an offset and a fresh prompt, pages shuffled.
struct PagedStep {
  ForwardBatch batch;
  int64_t page_size = 64, num_pages = 0;
  std::vector<float> cos, sin;
};

PagedStep MakeStep(const std::vector<std::pair<int32_t, int32_t>>& seqs, int64_t rot) {
  PagedStep s;
  int64_t pages = 0;
  for (auto [ctx, rows] : seqs) pages += (ctx + rows + s.page_size - 1) / s.page_size;
  s.num_pages = pages + 3;
  std::vector<int32_t> order(s.num_pages);
  for (int64_t i = 0; i < s.num_pages; ++i) order[i] = static_cast<int32_t>(i);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  ForwardBatch& b = s.batch;
  int32_t max_pages = 0;
  for (auto [ctx, rows] : seqs)
    max_pages = std::max<int32_t>(max_pages, (ctx + rows + s.page_size - 1) / s.page_size);
  b.max_pages_per_seq = max_pages;
  b.query_start.push_back(0);
  size_t next = 0;
  for (auto [ctx, rows] : seqs) {
    if (rows == 1 && b.query_start.size() - 1 == static_cast<size_t>(b.num_decodes))
      ++b.num_decodes;
    const int32_t n = (ctx + rows + s.page_size - 1) / s.page_size;
    std::vector<int32_t> table(max_pages, -1);
    for (int32_t j = 0; j < n; ++j) table[j] = order[next++];
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
    for (int32_t i = 0; i < rows; ++i) {
      const int32_t pos = ctx + i;
      b.token_ids.push_back(0);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(int64_t{table[pos / s.page_size]} * s.page_size + pos % s.page_size);
    }
    b.context_lens.push_back(ctx);
    b.query_start.push_back(b.query_start.back() + rows);
  }
  const int64_t rows = b.num_rows();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> ang(0.0f, 6.2831853f);
  s.cos.resize(rows * rot);
  s.sin.resize(rows * rot);
  for (int64_t i = 0; i < rows * rot; ++i) {
    const float a = ang(rng);
    s.cos[i] = std::cos(a);
    s.sin[i] = std::sin(a);
  }
  return s;
}

// The attention ops of one step at the real shapes, GPU against the CPU twins; MsaAttention on
// the GPU (fused into one attention kernel where the step allows) must equal MsaSelectBlocks
// then BlockSparseAttention there, bit for bit.
void CheckPagedAttentionOps(const std::vector<std::pair<int32_t, int32_t>>& seqs) {
  Backends& b = Both();
  const int64_t Hq = 64, Hkv = 4, D = 128, rot = 64, Hi = 4, Di = 128, B = 128, topk = 16;
  PagedStep st = MakeStep(seqs, rot);
  const int64_t rows = st.batch.num_rows(), P = st.num_pages, ps = st.page_size;
  engine::backend::StepMetadata mc = b.cpu->PrepareStep(st.batch, ps, st.cos, st.sin, rot);
  engine::backend::StepMetadata mg = b.gpu->PrepareStep(st.batch, ps, st.cos, st.sin, rot);

  // Caches filled with random keys (the cached contexts), then this step's rows written by
  // QkNormRopeToCache on each backend.
  engine::backend::LayerKvCache cc, cg;
  Twin k = Act(Random(P * ps * Hkv * D, 21), {P, ps, Hkv, D});
  Twin v = Act(Random(P * ps * Hkv * D, 22), {P, ps, Hkv, D});
  Twin ik = Act(Random(P * ps * Di, 23), {P, ps, Di});
  cc = {k.cpu, v.cpu, ik.cpu, {}, {}, {}, {}};
  cg = {k.gpu, v.gpu, ik.gpu, {}, {}, {}, {}};
  engine::backend::QkvLayout layout{Hq, Hkv, D, rot, Hi, Di, rot, 1e-6f};
  Twin qkv = Act(Random(rows * layout.width(), 24, 2.0f), {rows, layout.width()});
  Twin qn = Weight(Random(D, 25, 0.5f), {D}), kn = Weight(Random(D, 26, 0.5f), {D});
  Twin iqn = Weight(Random(Di, 27, 0.5f), {Di}), ikn = Weight(Random(Di, 28, 0.5f), {Di});
  Twin q = Act(std::vector<float>(rows * Hq * D), {rows, Hq, D});
  Twin iq = Act(std::vector<float>(rows * Hi * Di), {rows, Hi, Di});
  b.cpu_ops->QkNormRopeToCache(qkv.cpu, layout, {qn.cpu, kn.cpu, iqn.cpu, ikn.cpu}, mc, q.cpu,
                               &iq.cpu, cc);
  b.gpu_ops->QkNormRopeToCache(qkv.gpu, layout, {qn.gpu, kn.gpu, iqn.gpu, ikn.gpu}, mg, q.gpu,
                               &iq.gpu, cg);
  CHECK(Compare("QkNormRope q", q) < kTol);
  CHECK(Compare("QkNormRope index q", iq) < kTol);
  CHECK(Compare("QkNormRope k pages", k) < kTol);
  CHECK(Compare("QkNormRope v pages", v) == 0.0);
  CHECK(Compare("QkNormRope index k pages", ik) < kTol);
  // From here both sides read the GPU's bf16 q / index q / caches, so the comparisons below
  // measure the attention and indexer kernels alone.
  for (Twin* t : {&q, &iq, &k, &v, &ik}) {
    std::vector<float> g = Get(*b.gpu, t->gpu);
    b.cpu->Upload(g.data(), t->cpu);
  }

  engine::backend::AttentionShape shape{Hq, Hkv, D, static_cast<float>(1.0 / std::sqrt(128.0))};
  Twin att = Act(std::vector<float>(rows * Hq * D), {rows, Hq * D});
  b.cpu_ops->PagedAttention(q.cpu, cc, mc, shape, att.cpu);
  b.gpu_ops->PagedAttention(q.gpu, cg, mg, shape, att.gpu);
  CHECK(Compare("PagedAttention (decode 32K + chunks)", att) < kTol);

  engine::backend::MsaParams msa{Hi, Di, B, topk, 1};
  Twin sel = Ints(std::vector<int32_t>(Hi * rows * topk, -7), {Hi, rows, topk});
  b.cpu_ops->MsaSelectBlocks(iq.cpu, cc, mc, msa, sel.cpu);
  b.gpu_ops->MsaSelectBlocks(iq.gpu, cg, mg, msa, sel.gpu);
  const std::vector<int32_t> sc = GetInts(*b.cpu, sel.cpu), sg = GetInts(*b.gpu, sel.gpu);
  // Mismatches: the set of selected blocks differs. A near-tie: the two sides' k-th scores are
  // within bf16 rounding of the score (both computed here in double from the same bf16 data).
  const std::vector<float> hq = Get(*b.cpu, iq.cpu), hk = Get(*b.cpu, ik.cpu);
  int64_t mismatched = 0, near_ties = 0;
  const ForwardBatch& fb = st.batch;
  for (int64_t h = 0; h < Hi; ++h)
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t* a = sc.data() + (h * rows + r) * topk;
      const int32_t* g = sg.data() + (h * rows + r) * topk;
      std::vector<int32_t> sa(a, a + topk), sgv(g, g + topk);
      std::sort(sa.begin(), sa.end());
      std::sort(sgv.begin(), sgv.end());
      if (sa == sgv) continue;
      ++mismatched;
      int64_t s = 0;
      while (fb.query_start[s + 1] <= r) ++s;
      const int64_t pos = fb.context_lens[s] + (r - fb.query_start[s]);
      auto score = [&](int32_t blk) {
        double best = -1e300;
        for (int64_t j = blk * B; j <= std::min<int64_t>(pos, blk * B + B - 1); ++j) {
          const int64_t slot =
              int64_t{fb.block_tables[s * fb.max_pages_per_seq + j / ps]} * ps + j % ps;
          double dot = 0;
          for (int64_t c = 0; c < Di; ++c)
            dot += double(hq[(r * Hi + h) * Di + c]) * double(hk[slot * Di + c]);
          best = std::max(best, dot);
        }
        return best;
      };
      // Blocks chosen by one side only: their scores must be within rounding of each other.
      double lo = 1e300, hi = -1e300, mag = 0;
      for (int32_t x : sa)
        if (!std::binary_search(sgv.begin(), sgv.end(), x) && x >= 0) {
          lo = std::min(lo, score(x));
          mag = std::max(mag, std::abs(score(x)));
        }
      for (int32_t x : sgv)
        if (!std::binary_search(sa.begin(), sa.end(), x) && x >= 0) {
          hi = std::max(hi, score(x));
          mag = std::max(mag, std::abs(score(x)));
        }
      if (std::abs(hi - lo) <= 2e-3 * std::max(1.0, mag)) ++near_ties;
    }
  std::printf(
      "  MsaSelectBlocks: %lld of %lld (head, row) selections differ, %lld of them near-ties\n",
      static_cast<long long>(mismatched), static_cast<long long>(Hi * rows),
      static_cast<long long>(near_ties));
  CHECK(mismatched == near_ties);

  // Block-sparse attention over the GPU's selection on both sides.
  b.cpu->Upload(sg.data(), sel.cpu);
  b.cpu_ops->BlockSparseAttention(q.cpu, cc, mc, shape, sel.cpu, topk, B, att.cpu);
  b.gpu_ops->BlockSparseAttention(q.gpu, cg, mg, shape, sel.gpu, topk, B, att.gpu);
  CHECK(Compare("BlockSparseAttention (top-16 of 128)", att) < kTol);

  const std::vector<float> unfused = Get(*b.gpu, att.gpu);
  b.gpu->Upload(std::vector<int32_t>(Hi * rows * topk, -7).data(), sel.gpu);
  b.gpu->Upload(std::vector<float>(rows * Hq * D, 0.0f).data(), att.gpu);
  b.gpu_ops->MsaAttention(q.gpu, iq.gpu, cg, mg, msa, shape, sel.gpu, att.gpu);
  CHECK(GetInts(*b.gpu, sel.gpu) == sg);
  CHECK(Get(*b.gpu, att.gpu) == unfused);
}

// One FP8 K or V cache on both backends: e4m3 codes [P, ps, Hkv, D] and f32 scales [P, ps, Hkv],
// the same bytes on each.
struct Fp8Twin {
  Twin codes, scales;
};
Fp8Twin Fp8Cache(const std::vector<float>& values, int64_t P, int64_t ps, int64_t Hkv, int64_t D) {
  Backends& b = Both();
  const int64_t slots = P * ps;
  std::vector<int64_t> all(slots);
  for (int64_t i = 0; i < slots; ++i) all[i] = i;
  std::vector<uint8_t> codes(slots * Hkv * D);
  std::vector<float> scales(slots * Hkv);
  kernels::cpu::QuantizeKvRowsFp8(values.data(), slots, Hkv, D, all.data(), codes.data(),
                                  scales.data());
  Fp8Twin t{{b.cpu->Alloc(DType::kF8E4M3, {P, ps, Hkv, D}),
             b.gpu->Alloc(DType::kF8E4M3, {P, ps, Hkv, D})},
            {b.cpu->Alloc(DType::kF32, {P, ps, Hkv}), b.gpu->Alloc(DType::kF32, {P, ps, Hkv})}};
  for (Device* d : {b.cpu.get(), b.gpu.get()}) {
    d->Upload(codes.data(), d == b.cpu.get() ? t.codes.cpu : t.codes.gpu);
    d->Upload(scales.data(), d == b.cpu.get() ? t.scales.cpu : t.scales.gpu);
  }
  return t;
}
// A cache's values as float32 (code * scale), downloaded from one backend.
std::vector<float> Dequantized(Device& d, const DeviceTensor& codes, const DeviceTensor& scales) {
  std::vector<uint8_t> c(codes.numel());
  std::vector<float> s(scales.numel()), out(codes.numel());
  d.Download(codes, c.data());
  d.Download(scales, s.data());
  const int64_t D = codes.numel() / scales.numel();
  for (int64_t i = 0; i < scales.numel(); ++i)
    kernels::cpu::DequantizeKvVectorFp8(c.data() + i * D, s[i], D, out.data() + i * D);
  return out;
}
std::vector<uint8_t> Bytes(Device& d, const DeviceTensor& t) {
  std::vector<uint8_t> v(t.bytes());
  d.Download(t, v.data());
  return v;
}

// The attention ops of one step with the FP8 KV cache (LayerKvCache::fp8_kv) at the real
// shapes, GPU against the CPU twins: QkNormRopeToCache quantizing this step's K and V into their
// slots (V bit for bit: both quantize the same bf16 values; K within rounding of the norm and
// rotation, so a code may differ by one step), then PagedAttention, BlockSparseAttention over
// the GPU's selection, and MsaAttention on the GPU equal to its unfused ops bit for bit.
void CheckPagedAttentionOpsFp8(const std::vector<std::pair<int32_t, int32_t>>& seqs) {
  Backends& b = Both();
  const int64_t Hq = 64, Hkv = 4, D = 128, rot = 64, Hi = 4, Di = 128, B = 128, topk = 16;
  PagedStep st = MakeStep(seqs, rot);
  const int64_t rows = st.batch.num_rows(), P = st.num_pages, ps = st.page_size;
  engine::backend::StepMetadata mc = b.cpu->PrepareStep(st.batch, ps, st.cos, st.sin, rot);
  engine::backend::StepMetadata mg = b.gpu->PrepareStep(st.batch, ps, st.cos, st.sin, rot);
  Fp8Twin k = Fp8Cache(Random(P * ps * Hkv * D, 41), P, ps, Hkv, D);
  Fp8Twin v = Fp8Cache(Random(P * ps * Hkv * D, 42), P, ps, Hkv, D);
  Twin ik = Act(Random(P * ps * Di, 43), {P, ps, Di});
  engine::backend::LayerKvCache cc{k.codes.cpu, v.codes.cpu,  ik.cpu,      {},
                                   {},          k.scales.cpu, v.scales.cpu};
  engine::backend::LayerKvCache cg{k.codes.gpu, v.codes.gpu,  ik.gpu,      {},
                                   {},          k.scales.gpu, v.scales.gpu};
  REQUIRE(cc.fp8_kv());
  REQUIRE(cg.fp8_kv());
  engine::backend::QkvLayout layout{Hq, Hkv, D, rot, Hi, Di, rot, 1e-6f};
  Twin qkv = Act(Random(rows * layout.width(), 44, 2.0f), {rows, layout.width()});
  Twin qn = Weight(Random(D, 45, 0.5f), {D}), kn = Weight(Random(D, 46, 0.5f), {D});
  Twin iqn = Weight(Random(Di, 47, 0.5f), {Di}), ikn = Weight(Random(Di, 48, 0.5f), {Di});
  Twin q = Act(std::vector<float>(rows * Hq * D), {rows, Hq, D});
  Twin iq = Act(std::vector<float>(rows * Hi * Di), {rows, Hi, Di});
  b.cpu_ops->QkNormRopeToCache(qkv.cpu, layout, {qn.cpu, kn.cpu, iqn.cpu, ikn.cpu}, mc, q.cpu,
                               &iq.cpu, cc);
  b.gpu_ops->QkNormRopeToCache(qkv.gpu, layout, {qn.gpu, kn.gpu, iqn.gpu, ikn.gpu}, mg, q.gpu,
                               &iq.gpu, cg);
  CHECK(Compare("FP8 KV: QkNormRope q", q) < kTol);
  CHECK(Compare("FP8 KV: QkNormRope index k pages", ik) < kTol);
  const double k_err = RelativeL2(Dequantized(*b.gpu, k.codes.gpu, k.scales.gpu),
                                  Dequantized(*b.cpu, k.codes.cpu, k.scales.cpu));
  std::printf("  %-44s rel L2 %.3e\n", "FP8 KV: QkNormRope k pages (dequantized)", k_err);
  CHECK(k_err < kTol);
  CHECK(Bytes(*b.gpu, v.codes.gpu) == Bytes(*b.cpu, v.codes.cpu));
  CHECK(Bytes(*b.gpu, v.scales.gpu) == Bytes(*b.cpu, v.scales.cpu));
  // From here both sides read the GPU's q / index q / caches: the attention kernels alone.
  for (Twin* t : {&q, &iq, &ik}) {
    std::vector<float> g = Get(*b.gpu, t->gpu);
    b.cpu->Upload(g.data(), t->cpu);
  }
  for (Twin* t : {&k.codes, &k.scales, &v.codes, &v.scales})
    b.cpu->Upload(Bytes(*b.gpu, t->gpu).data(), t->cpu);

  engine::backend::AttentionShape shape{Hq, Hkv, D, static_cast<float>(1.0 / std::sqrt(128.0))};
  Twin att = Act(std::vector<float>(rows * Hq * D), {rows, Hq * D});
  b.cpu_ops->PagedAttention(q.cpu, cc, mc, shape, att.cpu);
  b.gpu_ops->PagedAttention(q.gpu, cg, mg, shape, att.gpu);
  CHECK(Compare("FP8 KV: PagedAttention", att) < kTol);

  engine::backend::MsaParams msa{Hi, Di, B, topk, 1};
  Twin sel = Ints(std::vector<int32_t>(Hi * rows * topk, -7), {Hi, rows, topk});
  b.gpu_ops->MsaSelectBlocks(iq.gpu, cg, mg, msa, sel.gpu);
  const std::vector<int32_t> sg = GetInts(*b.gpu, sel.gpu);
  b.cpu->Upload(sg.data(), sel.cpu);
  b.cpu_ops->BlockSparseAttention(q.cpu, cc, mc, shape, sel.cpu, topk, B, att.cpu);
  b.gpu_ops->BlockSparseAttention(q.gpu, cg, mg, shape, sel.gpu, topk, B, att.gpu);
  CHECK(Compare("FP8 KV: BlockSparseAttention (top-16 of 128)", att) < kTol);

  const std::vector<float> unfused = Get(*b.gpu, att.gpu);
  b.gpu->Upload(std::vector<int32_t>(Hi * rows * topk, -7).data(), sel.gpu);
  b.gpu->Upload(std::vector<float>(rows * Hq * D, 0.0f).data(), att.gpu);
  b.gpu_ops->MsaAttention(q.gpu, iq.gpu, cg, mg, msa, shape, sel.gpu, att.gpu);
  CHECK(GetInts(*b.gpu, sel.gpu) == sg);
  CHECK(Get(*b.gpu, att.gpu) == unfused);
}

TEST_CASE("FP8 KV cache: paged decoder attention ops match the CPU twins at 32K context") {
  CheckPagedAttentionOpsFp8({{32767, 1}, {5000, 1}, {3000, 64}, {0, 300}});
}

TEST_CASE("FP8 KV cache: the ops of a decode step match the CPU twins") {
  // Few decodes: MsaAttention selects inside the attention kernel (its cluster plan).
  CheckPagedAttentionOpsFp8({{32767, 1}, {5000, 1}});
}

TEST_CASE("paged decoder attention ops match the CPU twins at 32K context") {
  // decodes at 32K and 5000, a 64-row chunk at offset 3000, a fresh 300-row prompt
  CheckPagedAttentionOps({{32767, 1}, {5000, 1}, {3000, 64}, {0, 300}});
}

TEST_CASE("paged decoder attention ops of a decode step match the CPU twins") {
  // Few decodes: MsaAttention selects inside the attention kernel (its cluster plan).
  CheckPagedAttentionOps({{32767, 1}, {5000, 1}});
}

TEST_CASE("the rotary rows made on the device are the host's, bit for bit") {
  // Positions up to 1M, two rotary widths and bases (the real model's 64 at 5e6, and 128 at 1e4).
  PagedStep st = MakeStep({{0, 300}, {131000, 50}, {999990, 9}}, 2);
  for (auto [rot, theta] : {std::pair<int64_t, double>{64, 5e6}, {128, 1e4}}) {
    const std::vector<float> inv = kernels::cpu::RopeInverseFrequencies(rot, theta);
    std::vector<float> cos, sin;
    engine::backend::HostRopeTables(st.batch, inv, cos, sin);
    Device& gpu = *Both().gpu;
    const engine::backend::StepMetadata m =
        gpu.PrepareStepFromPositions(st.batch, st.page_size, inv);
    const std::vector<float> dc = Get(gpu, m.rope_cos), ds = Get(gpu, m.rope_sin);
    REQUIRE(dc.size() == cos.size());
    REQUIRE(ds.size() == sin.size());
    int64_t differ = 0;
    for (size_t i = 0; i < cos.size(); ++i) differ += (dc[i] != cos[i]) + (ds[i] != sin[i]);
    std::printf("  rotary %lld, theta %g: %lld of %zu values differ\n", static_cast<long long>(rot),
                theta, static_cast<long long>(differ), 2 * cos.size());
    CHECK(differ == 0);
  }
}

TEST_CASE("MoE routing and grouped experts match the CPU twins") {
  Backends& b = Both();
  const int64_t rows = 24, H = 6144, I = 3072, topk = 4;
  {
    const int64_t E = 128;
    Twin logits = Act(Random(rows * E, 31, 4.0f), {rows, E}, DType::kF32);
    Twin bias = Weight(Random(E, 32, 0.1f), {E});
    Twin ids = Ints(std::vector<int32_t>(rows * topk), {rows, topk});
    Twin wts = Act(std::vector<float>(rows * topk), {rows, topk}, DType::kF32);
    b.cpu_ops->MoeRoute(logits.cpu, bias.cpu, ids.cpu, wts.cpu, {});
    b.gpu_ops->MoeRoute(logits.gpu, bias.gpu, ids.gpu, wts.gpu, {});
    const std::vector<int32_t> all = GetInts(*b.cpu, ids.cpu);
    CHECK(all == GetInts(*b.gpu, ids.gpu));
    CHECK(Compare("MoeRoute weights (128 experts, top-4)", wts) < 1e-6);
    // Rank 1 of 2 (expert parallelism): experts 64..127 as 0..63, the others -1.
    b.cpu_ops->MoeRoute(logits.cpu, bias.cpu, ids.cpu, wts.cpu, {64, 64});
    b.gpu_ops->MoeRoute(logits.gpu, bias.gpu, ids.gpu, wts.gpu, {64, 64});
    std::vector<int32_t> local = all;
    for (int32_t& e : local) e = e >= 64 ? e - 64 : -1;
    CHECK(GetInts(*b.cpu, ids.cpu) == local);
    CHECK(GetInts(*b.gpu, ids.gpu) == local);
  }
  const int64_t E = 8;
  Twin gate_up = Weight(Random(E * 2 * I * H, 35, 0.03f), {E, 2 * I, H});
  Twin down = Weight(Random(E * H * I, 36, 0.03f), {E, H, I});
  engine::backend::SwigluParams sp{1.702f, 7.0f};
  // 24 rows: experts grouped on the host; 2 rows (8 picks of 8 experts): the device-grouped
  // GEMV kernels, no host synchronization. Then the same with every third pick another rank's
  // (id -1: expert parallelism), which adds nothing.
  for (const int64_t n : {rows, int64_t{2}, -rows, int64_t{-2}}) {
    CAPTURE(n);
    const bool remote = n < 0;
    const int64_t n_rows = remote ? -n : n;
    std::mt19937 rng(33);
    std::vector<int32_t> ids_host(n_rows * topk);
    std::vector<float> w_host(n_rows * topk);
    for (int64_t r = 0; r < n_rows; ++r) {
      std::vector<int32_t> e(E);
      for (int64_t i = 0; i < E; ++i) e[i] = static_cast<int32_t>(i);
      std::shuffle(e.begin(), e.end(), rng);
      for (int64_t j = 0; j < topk; ++j) {
        ids_host[r * topk + j] = remote && (r * topk + j) % 3 == 0 ? -1 : e[j];
        w_host[r * topk + j] = 0.25f + 0.1f * static_cast<float>(j);
      }
    }
    Twin ids = Ints(ids_host, {n_rows, topk});
    Twin wts = Act(w_host, {n_rows, topk}, DType::kF32);
    Twin x = Act(Random(n_rows * H, 34), {n_rows, H});
    Twin out = Act(Random(n_rows * H, 37), {n_rows, H});
    b.cpu_ops->MoeExperts(x.cpu, ids.cpu, wts.cpu, gate_up.cpu, down.cpu, sp, 2.5f, out.cpu);
    b.gpu_ops->MoeExperts(x.gpu, ids.gpu, wts.gpu, gate_up.gpu, down.gpu, sp, 2.5f, out.gpu);
    const std::string what = "MoeExperts (8 x 3072 x 6144, top-4, " + std::to_string(n_rows) +
                             " rows" + (remote ? ", every third pick remote)" : ")");
    CHECK(Compare(what.c_str(), out) < kTol);
  }
}

TEST_CASE("vision segment attention matches the CPU twin") {
  Backends& b = Both();
  const int64_t heads = 16, hd = 80, rot = 78, W = heads * hd;
  const std::vector<int64_t> segments = {0, 200, 456};
  const int64_t rows = segments.back();
  Twin qkv = Act(Random(rows * 3 * W, 41, 2.0f), {rows, 3 * W});
  std::vector<float> cos(rows * rot), sin(rows * rot);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> ang(0.0f, 6.2831853f);
  for (int64_t i = 0; i < rows * rot; ++i) {
    const float a = ang(rng);
    cos[i] = std::cos(a);
    sin[i] = std::sin(a);
  }
  Twin c = Act(cos, {rows, rot}, DType::kF32), s = Act(sin, {rows, rot}, DType::kF32);
  Twin out = Act(std::vector<float>(rows * W), {rows, W});
  b.cpu_ops->SegmentAttention(qkv.cpu, c.cpu, s.cpu, rot, segments, heads, hd, out.cpu);
  b.gpu_ops->SegmentAttention(qkv.gpu, c.gpu, s.gpu, rot, segments, heads, hd, out.gpu);
  CHECK(Compare("SegmentAttention (16 x 80, segments 200 + 256)", out) < kTol);
}

}  // namespace
}  // namespace m3::test

namespace m3::test {
namespace {

TEST_CASE("GPU memory exhaustion is a clear error, and the backend keeps working") {
  Backends& b = Both();
  CHECK_THROWS_WITH(b.gpu->Alloc(DType::kBF16, {int64_t{1} << 40}),
                    doctest::Contains("out of GPU memory on cuda:0 allocating 2097152 MiB"));
  std::vector<float> big(16, 1.0f);
  TensorView v{DType::kF32, {int64_t{1} << 40}, reinterpret_cast<const uint8_t*>(big.data()), 0};
  CHECK_THROWS_WITH(b.gpu->UploadWeight({&v, 1}, {int64_t{1} << 40}),
                    doctest::Contains("out of GPU memory"));
  Twin x = Act(Random(64, 51), {64});
  CHECK(Get(*b.gpu, x.gpu) == Get(*b.cpu, x.cpu));
}

}  // namespace
}  // namespace m3::test
