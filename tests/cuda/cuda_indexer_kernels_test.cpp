// The MSA indexer's GPU kernels (kernels/cuda/paged_msa_indexer.cuh: decode scan, tensor-core
// prefill scoring, top-k; FP8 quantization and scoring) called directly against their CPU
// twins at the real shapes (index 4 heads x 128, block 128, top-16, 1 local block), contexts up
// to 32K, page sizes 16 and 128, decode and prefill rows mixed in one step and decode-only
// steps. Selections must be equal except where the blocks that differ score within rounding of
// each other (near-ties: counted, printed and required to explain every mismatch).
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/cpu/msa_index_fp8.h"
#include "kernels/cpu/paged_msa_indexer.h"
#include "kernels/cuda/msa_index_fp8.cuh"
#include "kernels/cuda/paged_msa_indexer.cuh"
#include "shared/dtype.h"

namespace m3::test {
namespace {

namespace kc = m3::kernels::cuda;
namespace kp = m3::kernels::cpu;

void Ok(cudaError_t e) {
  if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
}

// A device copy of a host vector, freed with the object.
template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) { Ok(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T))); }
  explicit Dev(const std::vector<T>& h) : Dev(h.size()) {
    Ok(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p); }
  std::vector<T> Get() const {
    std::vector<T> h(n);
    Ok(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

constexpr int64_t kHeads = 4, kDim = 128, kBlock = 128, kTopK = 16;
const kp::IndexerParams kCpuParams{kHeads, kDim, kBlock, kTopK, 1};
const kc::IndexerParams kGpuParams{kHeads, kDim, kBlock, kTopK, 1};

// One step: sequences (context length, rows), pages shuffled, the block table wider than any
// sequence needs (as the runtime sizes it for the longest context).
struct Step {
  std::vector<int32_t> query_start, context_lens, block_tables;
  int64_t seqs = 0, rows = 0, max_pages = 0, page_size = 0, slots = 0, max_seq_len = 0;
  kp::PagedLayout Cpu() const {
    return {seqs,      query_start.data(), context_lens.data(), block_tables.data(),
            max_pages, page_size};
  }
};

// width_tokens: the block table covers at least this many tokens (a runtime sized for longer
// contexts than this step's; it changes the kernels' launch shapes, never the selection).
Step MakeStep(const std::vector<std::pair<int64_t, int64_t>>& seqs, int64_t page_size,
              uint32_t seed, int64_t width_tokens = 0) {
  Step st;
  st.seqs = static_cast<int64_t>(seqs.size());
  st.page_size = page_size;
  st.query_start.push_back(0);
  int64_t pages = 0;
  for (auto [ctx, n] : seqs) {
    st.context_lens.push_back(static_cast<int32_t>(ctx));
    st.query_start.push_back(st.query_start.back() + static_cast<int32_t>(n));
    const int64_t need = (ctx + n + page_size - 1) / page_size;
    st.max_pages = std::max(st.max_pages, need);
    st.max_seq_len = std::max(st.max_seq_len, ctx + n);
    pages += need;
  }
  st.max_pages = std::max(st.max_pages + 3, width_tokens / page_size);
  st.rows = st.query_start.back();
  std::vector<int32_t> perm(pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  st.block_tables.assign(st.seqs * st.max_pages, -1);  // unused entries: never read
  int64_t next = 0;
  for (int64_t s = 0; s < st.seqs; ++s) {
    const int64_t need = (seqs[s].first + seqs[s].second + page_size - 1) / page_size;
    for (int64_t i = 0; i < need; ++i) st.block_tables[s * st.max_pages + i] = perm[next++];
  }
  st.slots = pages * page_size;
  return st;
}

struct DevLayout {
  Dev<int32_t> qs, cl, bt;
  kc::PagedLayout layout;
  explicit DevLayout(const Step& st)
      : qs(st.query_start), cl(st.context_lens), bt(st.block_tables) {
    layout = {st.seqs, st.rows, qs.p, cl.p, bt.p, st.max_pages, st.page_size};
  }
};

// bf16-exact uniform values: bits for the GPU, floats for the CPU twin.
struct Bf16Data {
  std::vector<uint16_t> bits;
  std::vector<float> f;
};
Bf16Data Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  Bf16Data d{std::vector<uint16_t>(n), std::vector<float>(n)};
  for (int64_t i = 0; i < n; ++i) {
    d.bits[i] = F32ToBF16(u(rng));
    d.f[i] = BF16ToF32(d.bits[i]);
  }
  return d;
}

// Exact block score (double) of block b for (row r, head h), the largest sum |q k| of its keys
// (the scale of a float accumulation's error), and the largest deviation of any of its keys' dot
// products when the keys are replaced by `other` (the rounding bound of a comparison between two
// key representations; 0 when other is null).
struct BlockScore {
  double score = -1e300, magnitude = 0.0, bound = 0.0;
};
BlockScore Score(const Step& st, const std::vector<float>& q, const std::vector<float>& k,
                 const std::vector<float>* other, int64_t r, int64_t h, int32_t b) {
  int64_t s = 0;
  while (st.query_start[s + 1] <= r) ++s;
  const int64_t pos = st.context_lens[s] + (r - st.query_start[s]);
  BlockScore out;
  for (int64_t j = int64_t{b} * kBlock; j <= std::min<int64_t>(pos, (b + 1) * kBlock - 1); ++j) {
    const int64_t slot =
        int64_t{st.block_tables[s * st.max_pages + j / st.page_size]} * st.page_size +
        j % st.page_size;
    double dot = 0, abs_dot = 0, dev = 0;
    for (int64_t c = 0; c < kDim; ++c) {
      const double qc = q[(r * kHeads + h) * kDim + c];
      dot += qc * k[slot * kDim + c];
      abs_dot += std::abs(qc * k[slot * kDim + c]);
      if (other) dev += qc * ((*other)[slot * kDim + c] - k[slot * kDim + c]);
    }
    out.score = std::max(out.score, dot);
    out.magnitude = std::max(out.magnitude, abs_dot);
    out.bound = std::max(out.bound, std::abs(dev));
  }
  return out;
}

struct Agreement {
  int64_t pairs = 0, mismatched = 0, near_ties = 0;
};

// Selections a and b compared as sets per (head, row). A mismatch is a near-tie when the
// blocks only one side chose score (exactly, on keys k) within tol of each other, where tol is
// the relative float tolerance plus, with `other` keys, both blocks' rounding bounds.
Agreement Compare(const Step& st, const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                  const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>* other = nullptr) {
  Agreement g;
  g.pairs = kHeads * st.rows;
  for (int64_t h = 0; h < kHeads; ++h)
    for (int64_t r = 0; r < st.rows; ++r) {
      std::vector<int32_t> sa(a.begin() + (h * st.rows + r) * kTopK,
                              a.begin() + (h * st.rows + r + 1) * kTopK);
      std::vector<int32_t> sb(b.begin() + (h * st.rows + r) * kTopK,
                              b.begin() + (h * st.rows + r + 1) * kTopK);
      std::sort(sa.begin(), sa.end());
      std::sort(sb.begin(), sb.end());
      if (sa == sb) continue;
      ++g.mismatched;
      double lo = 1e300, hi = -1e300, mag = 0, bound = 0;
      bool padding_differs = false;
      auto only = [&](const std::vector<int32_t>& x, const std::vector<int32_t>& y, bool low) {
        for (int32_t blk : x) {
          if (std::binary_search(y.begin(), y.end(), blk)) continue;
          if (blk < 0) {
            padding_differs = true;
            continue;
          }
          const BlockScore bs = Score(st, q, k, other, r, h, blk);
          if (low)
            lo = std::min(lo, bs.score);
          else
            hi = std::max(hi, bs.score);
          mag = std::max(mag, std::abs(bs.score));
          bound = std::max(bound, bs.bound);
        }
      };
      only(sa, sb, true);
      only(sb, sa, false);
      if (!padding_differs && std::abs(hi - lo) <= 2e-3 * std::max(1.0, mag) + 2 * bound)
        ++g.near_ties;
    }
  return g;
}

void Print(const char* what, const Agreement& g) {
  std::printf("  %s: %lld of %lld (head, row) selections differ, %lld of them near-ties\n", what,
              static_cast<long long>(g.mismatched), static_cast<long long>(g.pairs),
              static_cast<long long>(g.near_ties));
}

// The GPU selection of a step (bf16 keys, or FP8 codes + scales).
std::vector<int32_t> GpuSelect(const Step& st, const Dev<uint16_t>& q, const kc::IndexKeys& keys) {
  DevLayout dl(st);
  const size_t ws_bytes = kc::IndexerWorkspaceBytes(dl.layout, kGpuParams);
  Dev<uint8_t> ws(ws_bytes);
  Dev<int32_t> sel(static_cast<size_t>(kHeads * st.rows * kTopK));
  Ok(cudaMemset(sel.p, 0x7f, sel.n * sizeof(int32_t)));
  kc::PagedIndexerSelect(reinterpret_cast<const kc::bf16*>(q.p), keys, dl.layout, kGpuParams,
                         st.max_seq_len, ws.p, ws_bytes, sel.p, nullptr);
  Ok(cudaDeviceSynchronize());
  return sel.Get();
}

struct Inputs {
  Bf16Data q, k;
  Dev<uint16_t> dq, dk;
  Inputs(const Step& st, uint32_t seed)
      : q(Random(st.rows * kHeads * kDim, seed, 1.0f)),
        k(Random(st.slots * kDim, seed + 1, 1.0f)),
        dq(q.bits),
        dk(k.bits) {}
};

void CheckBf16(const Step& st, const char* what) {
  Inputs in(st, 7);
  std::vector<int32_t> cpu(kHeads * st.rows * kTopK);
  kp::PagedIndexerSelectBlocks(in.q.f.data(), in.k.f.data(), st.Cpu(), kCpuParams, cpu.data());
  const std::vector<int32_t> gpu =
      GpuSelect(st, in.dq, kc::IndexKeys{reinterpret_cast<const kc::bf16*>(in.dk.p)});
  const Agreement g = Compare(st, cpu, gpu, in.q.f, in.k.f);
  Print(what, g);
  CHECK(g.mismatched == g.near_ties);
  CHECK(g.mismatched * 100 <= g.pairs);  // near-ties are rare on random data
}

// Mixed step: decodes at 32K and 5000, a one-row prompt, prefill chunks at offsets 3000 and
// 12000 (two and several 32-row tiles, the last partial), a fresh 300-row prompt.
const std::vector<std::pair<int64_t, int64_t>> kMixed = {
    {32767, 1}, {5000, 1}, {0, 1}, {3000, 64}, {12000, 200}, {0, 300}, {127, 1}};

TEST_CASE("MSA indexer kernels: mixed decode + prefill step matches the CPU twin") {
  for (int64_t ps : {16, 128}) {
    const Step st = MakeStep(kMixed, ps, 3);
    CheckBf16(st, ps == 16 ? "mixed step, page 16" : "mixed step, page 128");
  }
}

TEST_CASE("MSA indexer kernels: decode-only steps match the CPU twin") {
  for (int64_t ps : {16, 128}) {
    // Block boundaries (127, 128, 129 keys), the one-block context, 32K; block tables 128K wide
    // (the top-k's split path for few long rows).
    const Step st = MakeStep(
        {{32767, 1}, {0, 1}, {126, 1}, {127, 1}, {128, 1}, {20000, 1}, {4095, 1}, {9999, 1}}, ps, 5,
        131072);
    CheckBf16(st, ps == 16 ? "decode step, page 16" : "decode step, page 128");
  }
}

void CheckTies(const Step& st) {
  Inputs in(st, 23);
  for (int64_t i = 0; i < st.slots * kDim; ++i) {
    in.k.bits[i] = in.k.bits[i % kDim];
    in.k.f[i] = in.k.f[i % kDim];
  }
  Dev<uint16_t> dk(in.k.bits);
  std::vector<int32_t> cpu(kHeads * st.rows * kTopK);
  kp::PagedIndexerSelectBlocks(in.q.f.data(), in.k.f.data(), st.Cpu(), kCpuParams, cpu.data());
  const std::vector<int32_t> gpu =
      GpuSelect(st, in.dq, kc::IndexKeys{reinterpret_cast<const kc::bf16*>(dk.p)});
  CHECK(gpu == cpu);  // same blocks in the same order
  Dev<uint8_t> codes(st.slots * kDim);
  Dev<float> scales(st.slots);
  kc::QuantizeIndexKeysFp8(reinterpret_cast<const kc::bf16*>(dk.p), st.slots, kDim, codes.p,
                           scales.p, nullptr);
  CHECK(GpuSelect(st, in.dq, kc::IndexKeys{nullptr, codes.p, scales.p}) == cpu);
}

TEST_CASE("MSA indexer kernels: exact ties go to the lower block") {
  // Every key the same vector: all of a row's block scores are equal, so the selection is the
  // local block and then the lowest blocks, on both sides and for both key types; a mixed step
  // (one warp per selection) and a decode step (8 warps per selection, merged).
  for (const Step& st :
       {MakeStep(kMixed, 16, 21), MakeStep({{32767, 1}, {4000, 1}}, 128, 22, 131072)}) {
    CheckTies(st);
  }
}

TEST_CASE("MSA indexer kernels: FP8 quantization matches its CPU twin bit for bit") {
  const int64_t n = 4096;
  Bf16Data k = Random(n * kDim, 41, 3.0f);
  for (int64_t d = 0; d < kDim; ++d) k.bits[7 * kDim + d] = 0;  // an all-zero key: scale 1
  for (int64_t d = 0; d < kDim; ++d) k.f[7 * kDim + d] = 0.0f;
  Dev<uint16_t> dk(k.bits);
  Dev<uint8_t> codes(n * kDim);
  Dev<float> scales(n);
  kc::QuantizeIndexKeysFp8(reinterpret_cast<const kc::bf16*>(dk.p), n, kDim, codes.p, scales.p,
                           nullptr);
  Ok(cudaDeviceSynchronize());
  std::vector<uint8_t> cc(n * kDim);
  std::vector<float> cs(n);
  kp::QuantizeIndexKeysFp8(k.f.data(), n, kDim, cc.data(), cs.data());
  CHECK(codes.Get() == cc);
  CHECK(scales.Get() == cs);
  CHECK(cs[7] == 1.0f);
  // Round trip of every code through the CPU encoder (NaN aside).
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f) CHECK(kp::F32ToE4M3(kp::E4M3ToF32(static_cast<uint8_t>(c))) == c);
}

TEST_CASE("MSA indexer kernels: FP8 quantize-on-write from a step's rows matches its twin") {
  // The engine's FP8 cache: a step's keys [rows, dim] into their slots, rows with slot -1
  // (none) skipped, other slots untouched.
  const int64_t rows = 300, slots_n = 1024;
  Bf16Data k = Random(rows * kDim, 43, 3.0f);
  std::vector<int64_t> slots(rows);
  for (int64_t r = 0; r < rows; ++r) slots[r] = r % 7 == 3 ? -1 : (r * 37) % slots_n;
  Dev<uint16_t> dk(k.bits);
  Dev<int64_t> ds(slots);
  Dev<uint8_t> codes(std::vector<uint8_t>(slots_n * kDim, 0xAA));
  Dev<float> scales(std::vector<float>(slots_n, -1.0f));
  kc::QuantizeIndexKeyRowsFp8(reinterpret_cast<const kc::bf16*>(dk.p), rows, kDim, ds.p, codes.p,
                              scales.p, nullptr);
  Ok(cudaDeviceSynchronize());
  std::vector<uint8_t> cc(slots_n * kDim, 0xAA);
  std::vector<float> cs(slots_n, -1.0f);
  kp::QuantizeIndexKeyRowsFp8(k.f.data(), rows, kDim, slots.data(), cc.data(), cs.data());
  CHECK(codes.Get() == cc);
  CHECK(scales.Get() == cs);
}

TEST_CASE("MSA indexer kernels: FP8 keys match the FP8 twin and the bf16 selection") {
  for (int64_t ps : {16, 128}) {
    const Step st = MakeStep(kMixed, ps, 9);
    Inputs in(st, 11);
    // Quantize on write: every slot a row of the step wrote, then the rest of the cache (the
    // cached context) in bulk; both are the same per-key quantization.
    DevLayout dl(st);
    Dev<uint8_t> codes(st.slots * kDim);
    Dev<float> scales(st.slots);
    kc::QuantizeIndexKeysFp8(reinterpret_cast<const kc::bf16*>(in.dk.p), st.slots, kDim, codes.p,
                             scales.p, nullptr);
    kc::QuantizeStepIndexKeysFp8(reinterpret_cast<const kc::bf16*>(in.dk.p), dl.layout, kDim,
                                 codes.p, scales.p, nullptr);
    Ok(cudaDeviceSynchronize());
    const std::vector<uint8_t> hc = codes.Get();
    const std::vector<float> hs = scales.Get();
    std::vector<float> deq(st.slots * kDim);
    kp::DequantizeIndexKeysFp8(hc.data(), hs.data(), st.slots, kDim, deq.data());

    std::vector<int32_t> cpu8(kHeads * st.rows * kTopK), cpu16(cpu8.size());
    kp::PagedIndexerSelectBlocksFp8(in.q.f.data(), hc.data(), hs.data(), st.slots, st.Cpu(),
                                    kCpuParams, cpu8.data());
    kp::PagedIndexerSelectBlocks(in.q.f.data(), in.k.f.data(), st.Cpu(), kCpuParams, cpu16.data());
    const std::vector<int32_t> gpu8 =
        GpuSelect(st, in.dq, kc::IndexKeys{nullptr, codes.p, scales.p});
    const Agreement twin = Compare(st, cpu8, gpu8, in.q.f, deq);
    Print(ps == 16 ? "FP8 GPU vs FP8 twin, page 16" : "FP8 GPU vs FP8 twin, page 128", twin);
    CHECK(twin.mismatched == twin.near_ties);
    // Against bf16 keys: differences only where the FP8 rounding of the two blocks' keys can
    // reorder them.
    const Agreement vs16 = Compare(st, cpu16, gpu8, in.q.f, in.k.f, &deq);
    Print(ps == 16 ? "FP8 vs bf16 keys, page 16" : "FP8 vs bf16 keys, page 128", vs16);
    CHECK(vs16.mismatched == vs16.near_ties);
  }
}

// The block scores the fast path leaves in its workspace ([rows, heads, max_blocks]) against
// exact ones from the keys the GPU scored (k: bf16 keys, or the FP8 codes dequantized): within
// float accumulation of the key's |q| . |k|.
void CheckScores(const Step& st, const Dev<uint16_t>& dq, const std::vector<float>& q,
                 const kc::IndexKeys& keys, const std::vector<float>& k, const char* what) {
  DevLayout dl(st);
  const size_t ws_bytes = kc::IndexerWorkspaceBytes(dl.layout, kGpuParams);
  Dev<uint8_t> ws(ws_bytes);
  Dev<int32_t> sel(static_cast<size_t>(kHeads * st.rows * kTopK));
  kc::PagedIndexerSelect(reinterpret_cast<const kc::bf16*>(dq.p), keys, dl.layout, kGpuParams,
                         st.max_seq_len, ws.p, ws_bytes, sel.p, nullptr);
  Ok(cudaDeviceSynchronize());
  const std::vector<uint8_t> raw = ws.Get();
  const int64_t max_blocks = (st.max_pages * st.page_size + kBlock - 1) / kBlock;
  const float* gpu = reinterpret_cast<const float*>(raw.data());
  int64_t checked = 0, bad = 0;
  double worst = 0;
  for (int64_t s = 0; s < st.seqs; ++s)
    for (int64_t r = st.query_start[s]; r < st.query_start[s + 1]; ++r) {
      const int64_t pos = st.context_lens[s] + (r - st.query_start[s]);
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t b = 0; b <= pos / kBlock; ++b) {
          const BlockScore want = Score(st, q, k, nullptr, r, h, static_cast<int32_t>(b));
          const double err = std::abs(gpu[(r * kHeads + h) * max_blocks + b] - want.score);
          worst = std::max(worst, err / std::max(want.magnitude, 1e-30));
          bad += err > 1e-5 * want.magnitude + 1e-30;
          ++checked;
        }
    }
  std::printf("  %s: %lld block scores, worst error %.3g of sum |q k|\n", what,
              static_cast<long long>(checked), worst);
  CHECK(checked > 0);
  CHECK(bad == 0);
}

TEST_CASE("MSA indexer kernels: block scores of bf16 and FP8 keys, subnormal codes included") {
  // Every other key is one large value and small ones whose codes are e4m3 subnormals; the
  // queries ignore the large dim, so those keys' scores are the subnormal codes' alone.
  const Step st = MakeStep(kMixed, 16, 31);
  Inputs in(st, 33);
  for (int64_t i = 0; i < st.rows * kHeads; ++i) {
    in.q.bits[i * kDim] = 0;
    in.q.f[i * kDim] = 0.0f;
  }
  std::mt19937 rng(35);
  std::uniform_real_distribution<float> u(-0.006f, 0.006f);
  for (int64_t slot = 0; slot < st.slots; slot += 2)
    for (int64_t c = 0; c < kDim; ++c) {
      in.k.bits[slot * kDim + c] = F32ToBF16(c == 0 ? 200.0f : u(rng));
      in.k.f[slot * kDim + c] = BF16ToF32(in.k.bits[slot * kDim + c]);
    }
  Dev<uint16_t> dq(in.q.bits), dk(in.k.bits);
  CheckScores(st, dq, in.q.f, kc::IndexKeys{reinterpret_cast<const kc::bf16*>(dk.p)}, in.k.f,
              "bf16 keys");
  Dev<uint8_t> codes(st.slots * kDim);
  Dev<float> scales(st.slots);
  kc::QuantizeIndexKeysFp8(reinterpret_cast<const kc::bf16*>(dk.p), st.slots, kDim, codes.p,
                           scales.p, nullptr);
  Ok(cudaDeviceSynchronize());
  const std::vector<uint8_t> hc = codes.Get();
  const std::vector<float> hs = scales.Get();
  int64_t subnormal = 0;
  for (uint8_t c : hc) subnormal += (c & 0x78) == 0 && (c & 0x07) != 0;
  CHECK(subnormal * 4 > st.slots * kDim);  // most codes of half the keys
  std::vector<float> deq(st.slots * kDim);
  kp::DequantizeIndexKeysFp8(hc.data(), hs.data(), st.slots, kDim, deq.data());
  CheckScores(st, dq, in.q.f, kc::IndexKeys{nullptr, codes.p, scales.p}, deq, "FP8 keys");
}

TEST_CASE("MSA indexer kernels: other shapes take the generic kernel, bad calls are refused") {
  // The tiny models' shape (2 heads x 32, block 16, top-3, 2 local blocks).
  const Step st = MakeStep({{300, 1}, {40, 20}, {0, 5}}, 16, 13);
  const kp::IndexerParams cp{2, 32, 16, 3, 2};
  const kc::IndexerParams gp{2, 32, 16, 3, 2};
  const Bf16Data q = Random(st.rows * 2 * 32, 17), k = Random(st.slots * 32, 18);
  Dev<uint16_t> dq(q.bits), dk(k.bits);
  DevLayout dl(st);
  CHECK(kc::IndexerWorkspaceBytes(dl.layout, gp) == 0);
  Dev<int32_t> sel(2 * st.rows * 3);
  kc::PagedIndexerSelect(reinterpret_cast<const kc::bf16*>(dq.p),
                         kc::IndexKeys{reinterpret_cast<const kc::bf16*>(dk.p)}, dl.layout, gp,
                         st.max_seq_len, nullptr, 0, sel.p, nullptr);
  Ok(cudaDeviceSynchronize());
  std::vector<int32_t> cpu(2 * st.rows * 3);
  kp::PagedIndexerSelectBlocks(q.f.data(), k.f.data(), st.Cpu(), cp, cpu.data());
  const std::vector<int32_t> gpu = sel.Get();
  int64_t differ = 0;
  for (int64_t i = 0; i < 2 * st.rows; ++i) {
    std::vector<int32_t> a(cpu.begin() + i * 3, cpu.begin() + i * 3 + 3);
    std::vector<int32_t> b(gpu.begin() + i * 3, gpu.begin() + i * 3 + 3);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    differ += a != b;
  }
  CHECK(differ == 0);
  CHECK_THROWS_WITH_AS(kc::PagedIndexerSelect(reinterpret_cast<const kc::bf16*>(dq.p),
                                              kc::IndexKeys{nullptr, nullptr, nullptr}, dl.layout,
                                              gp, st.max_seq_len, nullptr, 0, sel.p, nullptr),
                       doctest::Contains("FP8 index keys need"), std::runtime_error);
  // The real shape with a workspace too small for the layout.
  const Step big = MakeStep({{1000, 1}, {0, 50}}, 16, 19);
  DevLayout bl(big);
  CHECK(kc::IndexerWorkspaceBytes(bl.layout, kGpuParams) > 0);
  CHECK_THROWS_WITH_AS(
      kc::PagedIndexerSelect(reinterpret_cast<const kc::bf16*>(dq.p),
                             kc::IndexKeys{reinterpret_cast<const kc::bf16*>(dk.p)}, bl.layout,
                             kGpuParams, big.max_seq_len, nullptr, 16, sel.p, nullptr),
      doctest::Contains("workspace of 16 bytes"), std::runtime_error);
}

}  // namespace
}  // namespace m3::test
