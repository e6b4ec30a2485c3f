// The fast paged-attention kernels (split-K decode, tensor-core prefill, dense and block-sparse)
// against their CPU twins (kernels/cpu/paged_attention.h) on random bf16 data: decode contexts
// on and off the split and tile boundaries, prefill chunks with cached context, partial last
// pages, page sizes 16 and 128, decodes mixed with prefills, head_dim 64 and 128 with 4 and 16
// q heads per KV group, the reference kernel's shapes, an explicit workspace against the pool,
// a decode step captured once in a CUDA graph and replayed at other context lengths, and the
// decode attention that selects its blocks from block scores against the top-k kernel followed
// by the attention (bit for bit), alone and chained after the index scan; and the same paths on
// FP8 K/V pages (codes and per-(slot, kv head) scales) against the CPU twin over the same codes.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/kv_cache_fp8.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cuda/msa_index_fp8.cuh"
#include "kernels/cuda/msa_index_topk.cuh"
#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/paged_msa_attention.cuh"
#include "shared/dtype.h"

namespace m3::test {
namespace {

namespace gpu = kernels::cuda;
namespace cpu = kernels::cpu;

void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A device copy of a host vector, freed with the object.
template <class T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t n = 0;
  DeviceArray() = default;
  explicit DeviceArray(size_t count) : n(count) {
    Cuda(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
  }
  template <class U>
  explicit DeviceArray(const std::vector<U>& host) : DeviceArray(host.size()) {
    Put(host);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr); }
  template <class U>
  void Put(const std::vector<U>& host) {
    static_assert(sizeof(U) == sizeof(T));
    Cuda(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<T> Get() const {
    std::vector<T> h(n);
    Cuda(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return h;
  }
};

struct Shape {
  int64_t hq, hkv, dim;
};

// One step's batch: (cached context, query rows) per sequence, pages shuffled, tables padded
// with -1 past each sequence's last page. Leading one-row sequences are the decodes.
struct Step {
  std::vector<int32_t> query_start{0}, context_lens, tables;
  int64_t seqs = 0, rows = 0, max_pages = 0, page_size = 0, num_pages = 0, num_decodes = 0;
};

Step MakeStep(const std::vector<std::pair<int32_t, int32_t>>& seqs, int64_t page_size,
              int64_t max_pages_floor, uint32_t seed) {
  Step s;
  s.page_size = page_size;
  s.seqs = static_cast<int64_t>(seqs.size());
  s.max_pages = max_pages_floor;
  int64_t pages = 0;
  for (auto [ctx, q] : seqs) {
    const int64_t n = (ctx + q + page_size - 1) / page_size;
    pages += n;
    s.max_pages = std::max(s.max_pages, n);
  }
  s.num_pages = pages + 2;
  std::vector<int32_t> order(s.num_pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  size_t next = 0;
  bool leading = true;
  for (auto [ctx, q] : seqs) {
    leading = leading && q == 1;
    if (leading) ++s.num_decodes;
    const int64_t n = (ctx + q + page_size - 1) / page_size;
    for (int64_t j = 0; j < s.max_pages; ++j) s.tables.push_back(j < n ? order[next++] : -1);
    s.context_lens.push_back(ctx);
    s.query_start.push_back(s.query_start.back() + q);
  }
  s.rows = s.query_start.back();
  return s;
}

// Uniform in [-scale, scale], rounded to bf16; `bits` gets the bf16 encodings.
std::vector<float> Random(int64_t n, uint32_t seed, float scale, std::vector<uint16_t>& bits) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  bits.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    bits[i] = F32ToBF16(u(rng));
    v[i] = BF16ToF32(bits[i]);
  }
  return v;
}

// Random selections [hkv, rows, topk]: the row's local block, other blocks it may see, and now
// and then an empty slot, a repeat or a block past the row's position (both sides ignore them).
std::vector<int32_t> RandomSelections(const Step& s, int64_t hkv, int64_t topk, int64_t block,
                                      uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> sel(hkv * s.rows * topk);
  for (int64_t g = 0; g < hkv; ++g)
    for (int64_t q = 0; q < s.seqs; ++q)
      for (int64_t r = s.query_start[q]; r < s.query_start[q + 1]; ++r) {
        const int64_t pos = s.context_lens[q] + (r - s.query_start[q]);
        const int32_t local = static_cast<int32_t>(pos / block);
        int32_t* out = sel.data() + (g * s.rows + r) * topk;
        for (int64_t i = 0; i < topk; ++i) {
          const uint32_t roll = rng() % 16;
          if (i == 0)
            out[i] = local;
          else if (roll == 0)
            out[i] = -1;
          else if (roll == 1)
            out[i] = out[rng() % i];
          else if (roll == 2)
            out[i] = local + 1;  // starts past pos
          else
            out[i] = static_cast<int32_t>(rng() % (local + 1));
        }
        std::shuffle(out, out + topk, rng);
      }
  return sel;
}

struct Errors {
  double total = 0;  // relative L2 over the whole output
  double worst = 0;  // the largest relative L2 of one (row, head)
};

Errors Compare(const std::vector<uint16_t>& got, const std::vector<float>& want, int64_t dim) {
  Errors e;
  double num = 0, den = 0;
  for (size_t h = 0; h < want.size() / dim; ++h) {
    double n = 0, d = 0;
    for (int64_t c = 0; c < dim; ++c) {
      const double x = BF16ToF32(got[h * dim + c]), y = want[h * dim + c];
      n += (x - y) * (x - y);
      d += y * y;
    }
    num += n;
    den += d;
    e.worst = std::max(e.worst, std::sqrt(n / std::max(d, 1e-6)));
  }
  e.total = std::sqrt(num / std::max(den, 1e-30));
  return e;
}

void Check(const char* what, const Errors& e) {
  std::printf("  %-58s rel L2 %.2e, worst head %.2e\n", what, e.total, e.worst);
  CHECK(e.total < 1e-2);
  CHECK(e.worst < 3e-2);
}

// Runs one step through the GPU entry points (with an explicit workspace, from the pool, with
// the decodes unmarked, and the reference kernel) and the CPU twin, dense or sparse (topk > 0).
// fp8: the K/V pages are FP8 codes and scales of the random values (kv_cache_fp8.cuh),
// quantized on the host, and the twin reads the same codes (kernels/cpu/kv_cache_fp8.h).
void RunCase(const std::string& name, const Step& s, const Shape& sh, int64_t topk, int64_t block,
             uint32_t seed, bool fp8 = false) {
  const int64_t D = sh.dim, slots = s.num_pages * s.page_size;
  std::vector<uint16_t> qb, kb, vb;
  const std::vector<float> q = Random(s.rows * sh.hq * D, seed, 2.0f, qb);
  const std::vector<float> k = Random(slots * sh.hkv * D, seed + 1, 1.0f, kb);
  const std::vector<float> v = Random(slots * sh.hkv * D, seed + 2, 1.0f, vb);
  const std::vector<int32_t> sel =
      topk > 0 ? RandomSelections(s, sh.hkv, topk, block, seed + 3) : std::vector<int32_t>{};
  std::vector<uint8_t> kc, vc;
  std::vector<float> ks, vs;
  if (fp8) {
    std::vector<int64_t> all(slots);
    std::iota(all.begin(), all.end(), 0);
    kc.resize(k.size());
    vc.resize(v.size());
    ks.resize(slots * sh.hkv);
    vs.resize(slots * sh.hkv);
    cpu::QuantizeKvRowsFp8(k.data(), slots, sh.hkv, D, all.data(), kc.data(), ks.data());
    cpu::QuantizeKvRowsFp8(v.data(), slots, sh.hkv, D, all.data(), vc.data(), vs.data());
  }
  const cpu::Fp8KvPages cp{kc.data(), ks.data(), vc.data(), vs.data()};

  const cpu::PagedLayout cl{s.seqs,          s.query_start.data(), s.context_lens.data(),
                            s.tables.data(), s.max_pages,          s.page_size};
  const cpu::AttentionDims cd{sh.hq, sh.hkv, D, 1.0f / std::sqrt(static_cast<float>(D))};
  std::vector<float> want(s.rows * sh.hq * D);
  if (topk > 0 && fp8)
    cpu::PagedBlockSparseAttention(q.data(), cp, cl, cd, sel.data(), topk, block, want.data());
  else if (topk > 0)
    cpu::PagedBlockSparseAttention(q.data(), k.data(), v.data(), cl, cd, sel.data(), topk, block,
                                   want.data());
  else if (fp8)
    cpu::PagedAttention(q.data(), cp, cl, cd, want.data());
  else
    cpu::PagedAttention(q.data(), k.data(), v.data(), cl, cd, want.data());

  DeviceArray<uint16_t> dq(qb), dk(kb), dv(vb), out(want.size());
  DeviceArray<uint8_t> dkc(kc), dvc(vc);
  DeviceArray<float> dks(ks), dvs(vs);
  DeviceArray<int32_t> qs(s.query_start), ctx(s.context_lens), tab(s.tables), dsel(sel);
  gpu::PagedLayout gl{s.seqs,  s.rows,      qs.ptr,      ctx.ptr,
                      tab.ptr, s.max_pages, s.page_size, s.num_decodes};
  const gpu::AttentionDims gd{sh.hq, sh.hkv, D, cd.scale};
  auto* bq = reinterpret_cast<const gpu::bf16*>(dq.ptr);
  auto* bo = reinterpret_cast<gpu::bf16*>(out.ptr);
  const gpu::KvPages kv = fp8 ? gpu::Fp8Kv(dkc.ptr, dvc.ptr, dks.ptr, dvs.ptr)
                              : gpu::Bf16Kv(reinterpret_cast<const gpu::bf16*>(dk.ptr),
                                            reinterpret_cast<const gpu::bf16*>(dv.ptr));
  auto run = [&](const gpu::PagedLayout& l, gpu::AttentionWorkspace ws) {
    Cuda(cudaMemset(out.ptr, 0xff, out.n * 2), "memset");  // NaNs where nothing is written
    if (topk > 0)
      gpu::PagedBlockSparseAttention(bq, kv, l, gd, dsel.ptr, topk, block, bo, nullptr, ws);
    else
      gpu::PagedAttention(bq, kv, l, gd, bo, nullptr, ws);
    Cuda(cudaDeviceSynchronize(), name.c_str());
    return out.Get();
  };
  const size_t ws_bytes = gpu::PagedAttentionWorkspaceBytes(gl, gd, topk);
  DeviceArray<unsigned char> ws(ws_bytes);
  Check((name + ", workspace").c_str(), Compare(run(gl, {ws.ptr, ws_bytes}), want, D));
  Check((name + ", pool").c_str(), Compare(run(gl, {}), want, D));
  gpu::PagedLayout unmarked = gl;
  unmarked.num_decodes = 0;
  Check((name + ", decodes unmarked").c_str(), Compare(run(unmarked, {}), want, D));
  if (ws_bytes > 0) {
    CHECK_THROWS_WITH_AS(run(gl, {ws.ptr, ws_bytes - 4}), doctest::Contains("workspace of"),
                         std::runtime_error);
  }
  Cuda(cudaMemset(out.ptr, 0xff, out.n * 2), "memset");
  gpu::PagedAttentionReference(bq, kv, gl, gd, topk > 0 ? dsel.ptr : nullptr, topk, block, bo,
                               nullptr);
  Cuda(cudaDeviceSynchronize(), "reference");
  Check((name + ", reference kernel").c_str(), Compare(out.Get(), want, D));
}

const Shape kReal{64, 4, 128};

// A block-sparse case with the prefill rows forced query-major, then key-block-major
// (paged_attention.cu's M3_SPARSE_PREFILL); below 256 prefill rows the dispatch takes the first.
void RunSparseBothWays(const std::string& name, const Step& s, const Shape& sh, int64_t topk,
                       int64_t block, uint32_t seed, bool fp8 = false) {
  for (const char* mode : {"query", "block"}) {
    setenv("M3_SPARSE_PREFILL", mode, 1);
    RunCase(name + ", " + mode + "-major", s, sh, topk, block, seed, fp8);
  }
  unsetenv("M3_SPARSE_PREFILL");
}

// A block-sparse decode case with the splits merged by a combine kernel, then by thread-block
// clusters of 8 and of 16 (paged_decode_attention.cu's M3_SPARSE_DECODE_CLUSTER; by default
// clusters only for a few (row, group) pairs).
void RunSparseDecodeAllWays(const std::string& name, const Step& s, const Shape& sh, int64_t topk,
                            int64_t block, uint32_t seed, bool fp8 = false) {
  for (const char* cluster : {"0", "8", "16"}) {
    setenv("M3_SPARSE_DECODE_CLUSTER", cluster, 1);
    RunCase(name + ", clusters of " + cluster, s, sh, topk, block, seed, fp8);
  }
  unsetenv("M3_SPARSE_DECODE_CLUSTER");
}

TEST_CASE("split-K decode attention matches the CPU twin, dense and block-sparse") {
  // Contexts on and off the 128-key pipeline rounds and the split lengths, one key up to 32K.
  const std::vector<std::pair<int32_t, int32_t>> decodes = {
      {32767, 1}, {0, 1}, {126, 1}, {127, 1}, {128, 1}, {1000, 1}, {5001, 1}, {20000, 1}};
  for (int64_t ps : {16, 128}) {
    const Step s = MakeStep(decodes, ps, 0, 5);
    const std::string tag = "decode x8 to 32K, page " + std::to_string(ps);
    RunCase(tag + ", dense", s, kReal, 0, 128, 100 + ps);
    RunSparseDecodeAllWays(tag + ", top-16 of 128", s, kReal, 16, 128, 200 + ps);
  }
  // A single decode with a table much wider than its context (splits past the end are empty).
  RunCase("decode 300 in a 64K-wide table, dense", MakeStep({{300, 1}}, 64, 1024, 9), kReal, 0, 128,
          300);
  // Sparse splits over the selected blocks laid end to end: one decode (each 128-key block two
  // splits), blocks of 32 keys (a pipeline round spans two), and 80 decodes (one split each,
  // written without partials).
  RunSparseDecodeAllWays("decode 20000 alone, top-16 of 128", MakeStep({{20000, 1}}, 128, 0, 14),
                         kReal, 16, 128, 301);
  // 192 selected keys: a cluster of 16 leaves most of its CTAs without keys.
  RunSparseDecodeAllWays("decode x8, page 16, top-6 of 32-key blocks", MakeStep(decodes, 16, 0, 15),
                         kReal, 6, 32, 302);
  // More than 32 slots: the selection's second half is checked for repeats of the first.
  RunSparseDecodeAllWays("decode x8, page 16, top-40 of 32-key blocks",
                         MakeStep(decodes, 16, 0, 17), kReal, 40, 32, 304);
  std::vector<std::pair<int32_t, int32_t>> many;
  for (int i = 0; i < 80; ++i) many.push_back({(i * 7919) % 9000, 1});
  RunCase("decode x80, top-16 of 128", MakeStep(many, 128, 0, 16), kReal, 16, 128, 303);
}

// A decode step whose attention selects its blocks from block scores (PagedMsaDecodeAttention)
// against the top-k kernel's selection and the attention over it: the same selection in the same
// order, and the same output bit for bit. Scores on a coarse grid (exact ties), now and then
// -inf, one row all equal, and garbage past each row's blocks (never read).
// fp8: on FP8 K/V pages (codes and scales of the random values).
void RunSelectingCase(const std::string& name, const Step& s, const Shape& sh, int64_t topk,
                      int64_t block, int64_t local, uint32_t seed, bool fp8 = false) {
  const int64_t D = sh.dim, slots = s.num_pages * s.page_size;
  std::vector<uint16_t> qb, kb, vb;
  Random(s.rows * sh.hq * D, seed, 2.0f, qb);
  const std::vector<float> k = Random(slots * sh.hkv * D, seed + 1, 1.0f, kb);
  const std::vector<float> v = Random(slots * sh.hkv * D, seed + 2, 1.0f, vb);
  std::vector<uint8_t> kc, vc;
  std::vector<float> ks, vs;
  if (fp8) {
    std::vector<int64_t> all(slots);
    std::iota(all.begin(), all.end(), 0);
    kc.resize(k.size());
    vc.resize(v.size());
    ks.resize(slots * sh.hkv);
    vs.resize(slots * sh.hkv);
    cpu::QuantizeKvRowsFp8(k.data(), slots, sh.hkv, D, all.data(), kc.data(), ks.data());
    cpu::QuantizeKvRowsFp8(v.data(), slots, sh.hkv, D, all.data(), vc.data(), vs.data());
  }
  const int64_t max_blocks = (s.max_pages * s.page_size + block - 1) / block;
  std::vector<float> scores(s.rows * sh.hkv * max_blocks);
  std::mt19937 rng(seed + 3);
  for (int64_t r = 0; r < s.rows; ++r) {
    const int64_t nb = std::min<int64_t>(s.context_lens[r] / block + 1, max_blocks);
    for (int64_t g = 0; g < sh.hkv; ++g)
      for (int64_t b = 0; b < max_blocks; ++b) {
        const uint32_t roll = rng() % 64;
        float& x = scores[(r * sh.hkv + g) * max_blocks + b];
        if (b >= nb)
          x = 1e30f;
        else if (r == 1)
          x = 0.25f;
        else if (roll < 6)
          x = -INFINITY;
        else
          x = static_cast<float>(static_cast<int>(roll % 17) - 8) / 8.0f;
      }
  }
  DeviceArray<uint16_t> dq(qb), dk(kb), dv(vb), out_a(s.rows * sh.hq * D), out_b(out_a.n);
  DeviceArray<uint8_t> dkc(kc), dvc(vc);
  DeviceArray<float> dks(ks), dvs(vs);
  DeviceArray<int32_t> qs(s.query_start), ctx(s.context_lens), tab(s.tables);
  DeviceArray<int32_t> sel_a(sh.hkv * s.rows * topk), sel_b(sel_a.n);
  DeviceArray<float> dscores(scores);
  gpu::PagedLayout gl{s.seqs,  s.rows,      qs.ptr,      ctx.ptr,
                      tab.ptr, s.max_pages, s.page_size, s.num_decodes};
  const gpu::AttentionDims gd{sh.hq, sh.hkv, D, 1.0f / std::sqrt(static_cast<float>(D))};
  auto* bq = reinterpret_cast<const gpu::bf16*>(dq.ptr);
  const gpu::KvPages kv = fp8 ? gpu::Fp8Kv(dkc.ptr, dvc.ptr, dks.ptr, dvs.ptr)
                              : gpu::Bf16Kv(reinterpret_cast<const gpu::bf16*>(dk.ptr),
                                            reinterpret_cast<const gpu::bf16*>(dv.ptr));
  Cuda(cudaMemset(out_b.ptr, 0xff, out_b.n * 2), "memset");
  Cuda(cudaMemset(sel_b.ptr, 0x7f, sel_b.n * 4), "memset");
  gpu::IndexTopK(dscores.ptr, gl, sh.hkv, block, max_blocks, topk, local, sel_a.ptr, nullptr);
  gpu::PagedBlockSparseAttention(bq, kv, gl, gd, sel_a.ptr, topk, block,
                                 reinterpret_cast<gpu::bf16*>(out_a.ptr), nullptr);
  const bool selects =
      gpu::PagedMsaDecodeAttention(bq, kv, gl, gd, dscores.ptr, max_blocks, local, topk, block,
                                   sel_b.ptr, reinterpret_cast<gpu::bf16*>(out_b.ptr), nullptr);
  Cuda(cudaDeviceSynchronize(), name.c_str());
  INFO(name);
  REQUIRE(selects);
  CHECK(sel_b.Get() == sel_a.Get());
  CHECK(out_b.Get() == out_a.Get());
  std::printf("  %-58s same selection and output\n", name.c_str());
}

TEST_CASE("decode attention selecting from block scores equals the top-k kernel, then attention") {
  const std::vector<std::pair<int32_t, int32_t>> decodes = {
      {32767, 1}, {20000, 1}, {0, 1}, {126, 1}, {127, 1}, {128, 1}, {5001, 1}, {9999, 1}};
  for (const char* cluster : {"8", "16"}) {
    setenv("M3_SPARSE_DECODE_CLUSTER", cluster, 1);
    const std::string c = std::string(", clusters of ") + cluster;
    for (int64_t ps : {16, 128})
      RunSelectingCase("decode x8, page " + std::to_string(ps) + ", top-16 of 128" + c,
                       MakeStep(decodes, ps, 0, 40), kReal, 16, 128, 1, 400 + ps);
    RunSelectingCase("decode x8, top-6 of 32-key blocks, 2 local" + c, MakeStep(decodes, 16, 0, 41),
                     kReal, 6, 32, 2, 410);
    RunSelectingCase("decode x8, top-40 of 32-key blocks" + c, MakeStep(decodes, 16, 0, 42), kReal,
                     40, 32, 1, 420);
    RunSelectingCase("decode x2 at 128K in a 256K-wide table" + c,
                     MakeStep({{131071, 1}, {100000, 1}}, 128, 2048, 43), kReal, 16, 128, 1, 430);
    // Rows past 1024 blocks: BlockTopK's threads hold more keys than they keep in registers.
    RunSelectingCase("decode x4 of 32 to 1876 32-key blocks" + c,
                     MakeStep({{60000, 1}, {40000, 1}, {32768, 1}, {1000, 1}}, 16, 0, 46), kReal,
                     16, 32, 1, 460);
    RunSelectingCase("decode x8, head_dim 64, 8 q heads per group" + c,
                     MakeStep(decodes, 16, 0, 44), Shape{16, 2, 64}, 16, 128, 1, 440);
  }
  // No cluster plan, or rows that are not decodes: the caller's top-k path.
  setenv("M3_SPARSE_DECODE_CLUSTER", "0", 1);
  const Step s = MakeStep(decodes, 16, 0, 45);
  DeviceArray<int32_t> qs(s.query_start), ctx(s.context_lens), tab(s.tables);
  gpu::PagedLayout gl{s.seqs,  s.rows,      qs.ptr,      ctx.ptr,
                      tab.ptr, s.max_pages, s.page_size, s.num_decodes};
  const gpu::AttentionDims gd{64, 4, 128, 0.088f};
  CHECK_FALSE(gpu::PagedMsaDecodeAttention(nullptr, nullptr, nullptr, gl, gd, nullptr, 300, 1, 16,
                                           128, nullptr, nullptr, nullptr));
  unsetenv("M3_SPARSE_DECODE_CLUSTER");
  gl.num_decodes = 0;
  CHECK_FALSE(gpu::PagedMsaDecodeAttention(nullptr, nullptr, nullptr, gl, gd, nullptr, 300, 1, 16,
                                           128, nullptr, nullptr, nullptr));
}

// The MSA decode chain as a step runs it (PagedMsaAttention: the index scan, then the attention
// that selects its blocks from the scan's block scores) against the scan, the top-k kernel and
// the attention one after another, at 128K, for many calls queued back to back on one stream
// (each call's scan rewrites the scores the previous call's attention read): the same selection
// and output bit for bit in every call, bf16 and FP8 index keys.
TEST_CASE("the MSA decode chain equals the unfused chain, call by call") {
  const Step s = MakeStep({{131071, 1}, {70000, 1}}, 128, 0, 47);
  const int64_t slots = s.num_pages * s.page_size, D = kReal.dim, rows = s.rows;
  const gpu::IndexerParams ip{kReal.hkv, 128, 128, 16, 1};
  std::vector<uint16_t> qb, kb, vb, iqb, ikb;
  Random(rows * kReal.hq * D, 480, 2.0f, qb);
  Random(slots * kReal.hkv * D, 481, 1.0f, kb);
  Random(slots * kReal.hkv * D, 482, 1.0f, vb);
  Random(rows * ip.num_heads * ip.head_dim, 483, 1.0f, iqb);
  Random(slots * ip.head_dim, 484, 1.0f, ikb);
  DeviceArray<uint16_t> dq(qb), dk(kb), dv(vb), diq(iqb), dik(ikb);
  DeviceArray<uint8_t> codes(slots * ip.head_dim);
  DeviceArray<float> scales(slots);
  DeviceArray<int32_t> qs(s.query_start), ctx(s.context_lens), tab(s.tables);
  const gpu::PagedLayout gl{s.seqs,  s.rows,      qs.ptr,      ctx.ptr,
                            tab.ptr, s.max_pages, s.page_size, s.num_decodes};
  const gpu::AttentionDims gd{kReal.hq, kReal.hkv, D, 1.0f / std::sqrt(static_cast<float>(D))};
  auto bf = [](const DeviceArray<uint16_t>& a) { return reinterpret_cast<gpu::bf16*>(a.ptr); };
  gpu::QuantizeIndexKeysFp8(bf(dik), slots, ip.head_dim, codes.ptr, scales.ptr, nullptr);
  const size_t ws_bytes = gpu::IndexerWorkspaceBytes(gl, ip);
  DeviceArray<uint8_t> ws(ws_bytes);
  cudaStream_t st = nullptr;
  Cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
  constexpr int kCalls = 12;
  for (const bool fp8 : {false, true}) {
    const gpu::IndexKeys keys = fp8 ? gpu::IndexKeys{nullptr, codes.ptr, scales.ptr}
                                    : gpu::IndexKeys{bf(dik), nullptr, nullptr};
    DeviceArray<int32_t> sel_ref(ip.num_heads * rows * ip.topk_blocks);
    DeviceArray<uint16_t> out_ref(rows * kReal.hq * D);
    gpu::PagedIndexerSelect(bf(diq), keys, gl, ip, 131072, ws.ptr, ws_bytes, sel_ref.ptr, st);
    gpu::PagedBlockSparseAttention(bf(dq), bf(dk), bf(dv), gl, gd, sel_ref.ptr, ip.topk_blocks,
                                   ip.block_size, bf(out_ref), st);
    std::deque<DeviceArray<int32_t>> sels;  // deque: the arrays are not movable
    std::deque<DeviceArray<uint16_t>> outs;
    for (int c = 0; c < kCalls; ++c) {
      sels.emplace_back(sel_ref.n);
      outs.emplace_back(out_ref.n);
    }
    for (int c = 0; c < kCalls; ++c)
      gpu::PagedMsaAttention(bf(dq), bf(dk), bf(dv), bf(diq), keys, gl, gd, ip, 131072, ws.ptr,
                             ws_bytes, sels[c].ptr, bf(outs[c]), st);
    Cuda(cudaStreamSynchronize(st), "MSA chain");
    const std::vector<int32_t> want_sel = sel_ref.Get();
    const std::vector<uint16_t> want_out = out_ref.Get();
    for (int c = 0; c < kCalls; ++c) {
      INFO((fp8 ? "FP8" : "bf16"), " index keys, call ", c);
      CHECK(sels[c].Get() == want_sel);
      CHECK(outs[c].Get() == want_out);
    }
    std::printf("  MSA decode chain, %s index keys: %d calls, same selection and output\n",
                fp8 ? "FP8" : "bf16", kCalls);
  }
  cudaStreamDestroy(st);
}

TEST_CASE("tensor-core prefill attention matches the CPU twin, dense and block-sparse") {
  const Shape group16{32, 2, 128};
  // Decodes first, then chunks with cached context ending mid-page, a fresh prompt, and a
  // one-row sequence after a chunk (not a decode: the prefill kernel takes it).
  const std::vector<std::pair<int32_t, int32_t>> mixed = {{4999, 1}, {130, 1}, {3000, 37},
                                                          {0, 70},   {517, 1}, {1200, 129}};
  for (int64_t ps : {16, 128}) {
    const Step s = MakeStep(mixed, ps, 0, 11);
    const std::string tag = "mixed decodes + chunks, page " + std::to_string(ps);
    RunCase(tag + ", dense", s, group16, 0, 128, 400 + ps);
    RunSparseBothWays(tag + ", top-16 of 128", s, group16, 16, 128, 500 + ps);
  }
  RunSparseBothWays("mixed, page 16, top-8 of 64-key blocks", MakeStep(mixed, 16, 0, 12), group16,
                    8, 64, 600);
  // head_dim 64, 4 q heads per group: four rows per warp, 16 per CTA.
  const Shape group4{8, 2, 64};
  const Step s4 = MakeStep({{700, 1}, {33, 1}, {100, 45}, {0, 19}, {257, 1}}, 16, 0, 13);
  RunCase("head_dim 64, 4 heads per group, dense", s4, group4, 0, 32, 700);
  RunSparseBothWays("head_dim 64, 4 heads per group, top-6 of 32-key blocks", s4, group4, 6, 32,
                    701);
  // One q head per group (eight rows per warp) and head_dim 32 (the reference kernel's shape).
  RunCase("head_dim 64, 1 head per group, dense", s4, Shape{2, 2, 64}, 0, 32, 702);
  RunCase("head_dim 32 (reference path), top-4 of 16", s4, Shape{4, 2, 32}, 4, 16, 703);
  // Enough prefill rows for the dispatch to go key-block-major on its own: a fresh 1500-row
  // prompt beside a chunk after cached context and a decode, at the real head shapes.
  RunCase("1500-row prompt + chunk, top-16 of 128, real heads",
          MakeStep({{2000, 1}, {0, 1500}, {700, 300}}, 128, 0, 17), kReal, 16, 128, 704);
  // One q head per group: sixteen rows per M tile.
  RunSparseBothWays("head_dim 64, 1 head per group, top-5 of 32-key blocks", s4, Shape{2, 2, 64}, 5,
                    32, 705);
}

// FP8 K/V pages (kv_cache_fp8.cuh) through every attention path, against the CPU twin over the
// same codes: the split-K decode (dense, and sparse with partials, clusters of 8 and 16), the
// tensor-core prefill (dense; sparse query-major and key-block-major), the key-block-major
// dispatch on its own, the reference kernel, at the real head shapes (64 q / 4 KV heads of 128,
// MSA block 128, top-16) and at head_dim 64. The kernels dequantize code * scale into bf16
// tiles, the twin in f32: the bf16 cases' tolerance holds.
TEST_CASE("FP8 KV pages: decode and prefill attention match the CPU twin") {
  const std::vector<std::pair<int32_t, int32_t>> decodes = {
      {32767, 1}, {0, 1}, {126, 1}, {127, 1}, {128, 1}, {1000, 1}, {5001, 1}, {20000, 1}};
  for (int64_t ps : {16, 128}) {
    const Step s = MakeStep(decodes, ps, 0, 5);
    const std::string tag = "FP8 KV, decode x8 to 32K, page " + std::to_string(ps);
    RunCase(tag + ", dense", s, kReal, 0, 128, 800 + ps, true);
    RunSparseDecodeAllWays(tag + ", top-16 of 128", s, kReal, 16, 128, 900 + ps, true);
  }
  RunSparseDecodeAllWays("FP8 KV, decode 20000 alone, top-16 of 128",
                         MakeStep({{20000, 1}}, 128, 0, 14), kReal, 16, 128, 1001, true);
  const std::vector<std::pair<int32_t, int32_t>> mixed = {{4999, 1}, {130, 1}, {3000, 37},
                                                          {0, 70},   {517, 1}, {1200, 129}};
  for (int64_t ps : {16, 128}) {
    const Step s = MakeStep(mixed, ps, 0, 11);
    const std::string tag = "FP8 KV, mixed decodes + chunks, page " + std::to_string(ps);
    RunCase(tag + ", dense", s, kReal, 0, 128, 1100 + ps, true);
    RunSparseBothWays(tag + ", top-16 of 128", s, kReal, 16, 128, 1200 + ps, true);
  }
  RunCase("FP8 KV, 1500-row prompt + chunk, top-16 of 128, real heads",
          MakeStep({{2000, 1}, {0, 1500}, {700, 300}}, 128, 0, 17), kReal, 16, 128, 1300, true);
  const Shape group4{8, 2, 64};
  const Step s4 = MakeStep({{700, 1}, {33, 1}, {100, 45}, {0, 19}, {257, 1}}, 16, 0, 13);
  RunCase("FP8 KV, head_dim 64, 4 heads per group, dense", s4, group4, 0, 32, 1400, true);
  RunSparseBothWays("FP8 KV, head_dim 64, 4 heads per group, top-6 of 32-key blocks", s4, group4, 6,
                    32, 1401, true);
  RunCase("FP8 KV, head_dim 32 (reference path), top-4 of 16", s4, Shape{4, 2, 32}, 4, 16, 1402,
          true);
}

// The decode attention that selects its blocks from block scores, on FP8 pages: the same
// selection and output, bit for bit, as the top-k kernel followed by the attention over them.
TEST_CASE("FP8 KV pages: the selecting decode attention equals top-k, then attention") {
  const std::vector<std::pair<int32_t, int32_t>> decodes = {
      {32767, 1}, {20000, 1}, {0, 1}, {126, 1}, {127, 1}, {128, 1}, {5001, 1}, {9999, 1}};
  for (const char* cluster : {"8", "16"}) {
    setenv("M3_SPARSE_DECODE_CLUSTER", cluster, 1);
    const std::string c = std::string(", clusters of ") + cluster;
    for (int64_t ps : {16, 128})
      RunSelectingCase("FP8 KV, decode x8, page " + std::to_string(ps) + ", top-16 of 128" + c,
                       MakeStep(decodes, ps, 0, 40), kReal, 16, 128, 1, 1500 + ps, true);
  }
  unsetenv("M3_SPARSE_DECODE_CLUSTER");
}

TEST_CASE("decode attention captured in a CUDA graph follows the context lengths on the device") {
  // Captured once with the step's shape (3 decodes, tables 96 pages of 128 wide); replayed after
  // the context lengths (and tables) change on the device, as in graph-replayed decode steps.
  const Shape sh = kReal;
  const int64_t D = sh.dim, width = 96, ps = 128;
  // Every sequence owns a full-width table, so any context below 12288 is addressable.
  Step s = MakeStep({{12287, 1}, {12287, 1}, {12287, 1}}, ps, width, 21);
  const int64_t slots = s.num_pages * ps;
  std::vector<uint16_t> qb, kb, vb;
  const std::vector<float> q = Random(s.rows * sh.hq * D, 22, 2.0f, qb);
  const std::vector<float> k = Random(slots * sh.hkv * D, 23, 1.0f, kb);
  const std::vector<float> v = Random(slots * sh.hkv * D, 24, 1.0f, vb);
  DeviceArray<uint16_t> dq(qb), dk(kb), dv(vb), out(s.rows * sh.hq * D);
  DeviceArray<int32_t> qs(s.query_start), ctx(s.context_lens), tab(s.tables);
  const gpu::PagedLayout gl{s.seqs,  s.rows,      qs.ptr,      ctx.ptr,
                            tab.ptr, s.max_pages, s.page_size, s.num_decodes};
  const gpu::AttentionDims gd{sh.hq, sh.hkv, D, 1.0f / std::sqrt(128.0f)};
  const size_t ws_bytes = gpu::PagedAttentionWorkspaceBytes(gl, gd, 0);
  DeviceArray<unsigned char> ws(ws_bytes);
  cudaStream_t stream;
  Cuda(cudaStreamCreate(&stream), "stream");
  cudaGraph_t graph;
  Cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
  gpu::PagedAttention(reinterpret_cast<const gpu::bf16*>(dq.ptr),
                      reinterpret_cast<const gpu::bf16*>(dk.ptr),
                      reinterpret_cast<const gpu::bf16*>(dv.ptr), gl, gd,
                      reinterpret_cast<gpu::bf16*>(out.ptr), stream, {ws.ptr, ws_bytes});
  Cuda(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec;
  Cuda(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  for (const std::vector<int32_t>& lens :
       {std::vector<int32_t>{9000, 100, 12287}, std::vector<int32_t>{3, 11000, 129}}) {
    s.context_lens = lens;
    ctx.Put(lens);
    const cpu::PagedLayout cl{s.seqs,          s.query_start.data(), s.context_lens.data(),
                              s.tables.data(), s.max_pages,          s.page_size};
    std::vector<float> want(out.n);
    cpu::PagedAttention(q.data(), k.data(), v.data(), cl, {sh.hq, sh.hkv, D, gd.scale},
                        want.data());
    Cuda(cudaGraphLaunch(exec, stream), "graph launch");
    Cuda(cudaStreamSynchronize(stream), "graph run");
    Check(("graph replay, contexts " + std::to_string(lens[0]) + "/" + std::to_string(lens[1]) +
           "/" + std::to_string(lens[2]))
              .c_str(),
          Compare(out.Get(), want, D));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace m3::test
