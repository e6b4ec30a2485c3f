// m3-bench-cuda-attention: the paged attention kernels at the real MSA shapes (64 q / 4 KV
// heads, head_dim 128, page = MSA block = 128 keys, top-16): dense and block-sparse decode at
// batch 1 and 32 and prefill of one whole prompt, at 8K / 32K / 128K context, beside the GPU's
// HBM read bandwidth and its cuBLAS bf16 GEMM rate measured in the same run. Each size gets fresh
// random data (K/V, q, shuffled pages, random valid selections with the local block); times
// are CUDA-event medians after warm-up; decode is timed both eagerly (host launch cost included)
// and replayed from a CUDA graph of 20 calls (per call: the GPU time, as graph-replayed decode
// steps see it). Sparse prefill runs twice: selections drawn for every
// row alone (no two rows share more than chance) and "coherent" (runs of 64 rows share their
// non-local picks, as neighbouring queries of a real indexer mostly do).
// --kv-fp8: the same runs on FP8 K/V pages (e4m3 codes + a float32 scale per key and KV head,
// kernels/cuda/kv_cache_fp8.cuh); bandwidths count the codes and scales read.
// Usage: m3-bench-cuda-attention [--quick] [--kv-fp8]  (--quick: 8K and 32K only)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/paged_attention.cuh"

namespace {

using m3::kernels::cuda::AttentionDims;
using m3::kernels::cuda::AttentionWorkspace;
using m3::kernels::cuda::bf16;
using m3::kernels::cuda::KvPages;
using m3::kernels::cuda::PagedLayout;

constexpr int64_t kHq = 64, kHkv = 4, kDim = 128, kPage = 128, kTopk = 16;

cudaStream_t g_stream = nullptr;  // every timed call and fill runs on it
bool g_fp8 = false;               // --kv-fp8

void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

__device__ __forceinline__ uint32_t Hash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void FillRandom(bf16* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float u = (Hash(seed * 0x9e3779b97f4a7c15ull + i) >> 8) * (1.0f / 16777216.0f);
    p[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

// Random e4m3 codes (never the NaN code) and scales of values up to `scale` in magnitude.
__global__ void FillFp8(uint8_t* codes, float* scales, int64_t n, int64_t dim, uint64_t seed,
                        float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint32_t h = Hash(seed * 0x9e3779b97f4a7c15ull + i);
    codes[i] = static_cast<uint8_t>((h & 0x80u) | ((h >> 8) % 0x7fu));
    if (i % dim == 0) scales[i / dim] = scale / 448.0f;
  }
}

// selected[g][r][i] for rows at position ctx + r * pos_step (prefill: 1, decodes: 0): slot 0
// the local block, the others uniform over blocks [0, local] (repeats allowed: counted once).
// coherent > 1: rows r / coherent share their draws.
__global__ void FillSelections(int32_t* sel, int64_t rows, int64_t ctx, int64_t pos_step,
                               uint64_t seed, int64_t coherent) {
  const int64_t n = kHkv * rows * kTopk;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t slot = i % kTopk, r = (i / kTopk) % rows, g = i / (kTopk * rows);
    const int64_t local = (ctx + r * pos_step) / kPage;
    const int64_t key = ((g * rows + r / coherent) * kTopk + slot);
    sel[i] = slot == 0 ? static_cast<int32_t>(local)
                       : static_cast<int32_t>(Hash(seed ^ (key * 0x9e3779b97f4a7c15ull)) %
                                              static_cast<uint32_t>(local + 1));
  }
}

__global__ void ReadAll(const int4* p, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678) *sink = acc;  // keeps the loads
}

void Fill(bf16* p, int64_t n, uint64_t seed, float scale) {
  FillRandom<<<4096, 256, 0, g_stream>>>(p, n, seed, scale);
  Cuda(cudaGetLastError(), "fill");
}

template <class T>
T* Alloc(int64_t n);

// K and V pages of `slots` slots filled with random data: bf16, or FP8 codes and scales
// (--kv-fp8).
struct KvBuffers {
  void* k = nullptr;
  void* v = nullptr;
  float* ks = nullptr;
  float* vs = nullptr;
  KvBuffers(int64_t slots, uint64_t seed) {
    const int64_t n = slots * kHkv * kDim;
    if (g_fp8) {
      k = Alloc<uint8_t>(n);
      v = Alloc<uint8_t>(n);
      ks = Alloc<float>(slots * kHkv);
      vs = Alloc<float>(slots * kHkv);
      FillFp8<<<4096, 256, 0, g_stream>>>(static_cast<uint8_t*>(k), ks, n, kDim, seed + 1, 1.0f);
      FillFp8<<<4096, 256, 0, g_stream>>>(static_cast<uint8_t*>(v), vs, n, kDim, seed + 2, 1.0f);
      Cuda(cudaGetLastError(), "fill");
    } else {
      k = Alloc<bf16>(n);
      v = Alloc<bf16>(n);
      Fill(static_cast<bf16*>(k), n, seed + 1, 1.0f);
      Fill(static_cast<bf16*>(v), n, seed + 2, 1.0f);
    }
  }
  KvBuffers(const KvBuffers&) = delete;
  KvBuffers& operator=(const KvBuffers&) = delete;
  ~KvBuffers() {
    for (void* p : {k, v, static_cast<void*>(ks), static_cast<void*>(vs)}) cudaFree(p);
  }
  KvPages pages() const { return {k, v, ks, vs}; }
  // Bytes one key of one KV head takes in K and V together.
  static double KeyBytes() { return g_fp8 ? 2.0 * (kDim + 4) : 2.0 * kDim * 2; }
};

// Median milliseconds of `runs` timed calls after `warm` untimed ones.
double Median(const std::function<void()>& f, int warm, int runs) {
  for (int i = 0; i < warm; ++i) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    cudaEventRecord(a, g_stream);
    f();
    cudaEventRecord(b, g_stream);
    Cuda(cudaEventSynchronize(b), "timed run");
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The same for `f` captured kCalls times in one CUDA graph, per call: the GPU time of a call
// without its host launch cost, as decode steps replayed from graphs run.
double MedianGraph(const std::function<void()>& f, int runs) {
  constexpr int kCalls = 20;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  Cuda(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < kCalls; ++i) f();
  Cuda(cudaStreamEndCapture(g_stream, &graph), "end capture");
  Cuda(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  const double ms = Median([&] { cudaGraphLaunch(exec, g_stream); }, 2, runs);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ms / kCalls;
}

template <class T>
T* Alloc(int64_t n) {
  T* p = nullptr;
  Cuda(cudaMalloc(&p, static_cast<size_t>(n) * sizeof(T)), "cudaMalloc");
  return p;
}

// A step on the device: seqs sequences of `rows_per_seq` rows after `ctx` cached tokens, pages
// shuffled over the whole cache.
struct Step {
  std::vector<int32_t> qs, lens, tables;
  int32_t *d_qs = nullptr, *d_lens = nullptr, *d_tables = nullptr;
  PagedLayout layout;
  int64_t pages = 0;
  Step(int64_t seqs, int64_t ctx, int64_t rows_per_seq, uint32_t seed) {
    const int64_t per = (ctx + rows_per_seq + kPage - 1) / kPage;
    pages = seqs * per;
    std::vector<int32_t> order(pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    qs.push_back(0);
    for (int64_t s = 0; s < seqs; ++s) {
      qs.push_back(static_cast<int32_t>(qs.back() + rows_per_seq));
      lens.push_back(static_cast<int32_t>(ctx));
      tables.insert(tables.end(), order.begin() + s * per, order.begin() + (s + 1) * per);
    }
    d_qs = Up(qs);
    d_lens = Up(lens);
    d_tables = Up(tables);
    layout = {seqs, qs.back(), d_qs, d_lens, d_tables, per, kPage, rows_per_seq == 1 ? seqs : 0};
  }
  ~Step() {
    cudaFree(d_qs);
    cudaFree(d_lens);
    cudaFree(d_tables);
  }
  static int32_t* Up(const std::vector<int32_t>& h) {
    int32_t* d = Alloc<int32_t>(static_cast<int64_t>(h.size()));
    Cuda(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice), "upload");
    return d;
  }
};

double HbmReadGBs() {
  const int64_t bytes = int64_t{4} << 30;
  int4* p = Alloc<int4>(bytes / 16);
  int* sink = Alloc<int>(1);
  Cuda(cudaMemset(p, 1, bytes), "memset");
  Cuda(cudaDeviceSynchronize(), "memset");
  const double ms =
      Median([&] { ReadAll<<<132 * 16, 512, 0, g_stream>>>(p, bytes / 16, sink); }, 2, 7);
  cudaFree(p);
  cudaFree(sink);
  return bytes / ms / 1e6;
}

double GemmTflops() {
  const int n = 8192;
  bf16* a = Alloc<bf16>(int64_t{n} * n);
  bf16* b = Alloc<bf16>(int64_t{n} * n);
  bf16* c = Alloc<bf16>(int64_t{n} * n);
  Fill(a, int64_t{n} * n, 1, 1.0f);
  Fill(b, int64_t{n} * n, 2, 1.0f);
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetStream(h, g_stream);
  const float one = 1.0f, zero = 0.0f;
  const double ms = Median(
      [&] {
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF,
                     n, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      },
      3, 9);
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 2.0 * n * n * double(n) / ms / 1e9;
}

const AttentionDims kDims{kHq, kHkv, kDim, 0.08838834764831845f};

// Decode of `batch` sequences at `ctx` cached tokens: dense and top-16 sparse (medians, ms).
void Decode(int64_t batch, int64_t ctx, double hbm_gbs, uint32_t seed) {
  Step st(batch, ctx, 1, seed);
  const int64_t slots = st.pages * kPage;
  const KvBuffers kvb(slots, seed);
  const KvPages kv = kvb.pages();
  bf16 *q = Alloc<bf16>(batch * kHq * kDim), *out = Alloc<bf16>(batch * kHq * kDim);
  Fill(q, batch * kHq * kDim, seed + 3, 2.0f);
  int32_t* sel = Alloc<int32_t>(kHkv * batch * kTopk);
  FillSelections<<<64, 256, 0, g_stream>>>(sel, batch, ctx, 0, seed + 4, 1);
  const size_t dense_ws = m3::kernels::cuda::PagedAttentionWorkspaceBytes(st.layout, kDims, 0);
  const size_t sparse_ws = m3::kernels::cuda::PagedAttentionWorkspaceBytes(st.layout, kDims, kTopk);
  void* ws = Alloc<unsigned char>(static_cast<int64_t>(std::max(dense_ws, sparse_ws)) + 16);
  auto dense_call = [&] {
    m3::kernels::cuda::PagedAttention(q, kv, st.layout, kDims, out, g_stream,
                                      AttentionWorkspace{ws, dense_ws});
  };
  auto sparse_call = [&] {
    m3::kernels::cuda::PagedBlockSparseAttention(q, kv, st.layout, kDims, sel, kTopk, kPage, out,
                                                 g_stream, AttentionWorkspace{ws, sparse_ws});
  };
  const double dense_eager = Median(dense_call, 3, 15), sparse_eager = Median(sparse_call, 3, 15);
  const double dense = MedianGraph(dense_call, 9), sparse = MedianGraph(sparse_call, 9);
  Cuda(cudaDeviceSynchronize(), "decode");
  const double dense_bytes = double(batch) * (ctx + 1) * kHkv * KvBuffers::KeyBytes();
  const double sparse_bytes = double(batch) * kHkv * kTopk * kPage * KvBuffers::KeyBytes();
  const double roof = dense_bytes / hbm_gbs / 1e6;
  std::printf(
      "%sdecode   batch %-3lld ctx %-7lld graph: dense %8.4f ms (%5.0f GB/s, %3.0f%% of roofline "
      "%.4f ms)  sparse %7.4f ms (%5.0f GB/s)  dense/sparse %5.1fx | eager: dense %8.4f ms  "
      "sparse %7.4f ms\n",
      g_fp8 ? "fp8 KV " : "", static_cast<long long>(batch), static_cast<long long>(ctx), dense,
      dense_bytes / dense / 1e6, 100.0 * roof / dense, roof, sparse, sparse_bytes / sparse / 1e6,
      dense / sparse, dense_eager, sparse_eager);
  for (void* p : {static_cast<void*>(q), static_cast<void*>(out), static_cast<void*>(sel), ws})
    cudaFree(p);
}

// Prefill of one prompt of t tokens (no cached context): dense causal and top-16 sparse.
void Prefill(int64_t t, uint32_t seed, int runs) {
  Step st(1, 0, t, seed);
  const int64_t slots = st.pages * kPage;
  const KvBuffers kvb(slots, seed);
  const KvPages kv = kvb.pages();
  bf16 *q = Alloc<bf16>(t * kHq * kDim), *out = Alloc<bf16>(t * kHq * kDim);
  Fill(q, t * kHq * kDim, seed + 3, 2.0f);
  int32_t* sel = Alloc<int32_t>(kHkv * t * kTopk);
  const double dense = Median(
      [&] { m3::kernels::cuda::PagedAttention(q, kv, st.layout, kDims, out, g_stream); }, 1, runs);
  double sparse[2];
  for (int c = 0; c < 2; ++c) {
    FillSelections<<<4096, 256, 0, g_stream>>>(sel, t, 0, 1, seed + 4 + c, c == 0 ? 1 : 64);
    sparse[c] = Median(
        [&] {
          m3::kernels::cuda::PagedBlockSparseAttention(q, kv, st.layout, kDims, sel, kTopk, kPage,
                                                       out, g_stream);
        },
        1, runs);
  }
  Cuda(cudaDeviceSynchronize(), "prefill");
  // Useful FLOPs: QK and PV, 4 * head_dim per (q head, visible key).
  const double dense_flop = 4.0 * kHq * kDim * (double(t) * (t + 1) / 2);
  double sparse_keys = 0;  // keys a row sees: min(pos + 1, 16 blocks) in expectation, bounded
  for (int64_t r = 0; r < t; ++r) sparse_keys += std::min<int64_t>(r + 1, kTopk * kPage);
  const double sparse_flop_max = 4.0 * kHq * kDim * sparse_keys;
  std::printf(
      "%sprefill  tokens %-7lld dense %9.2f ms (%5.0f TFLOP/s)  sparse random %8.2f ms  "
      "coherent %8.2f ms (<= %5.0f / %5.0f TFLOP/s)  dense/sparse %5.1fx / %5.1fx\n",
      g_fp8 ? "fp8 KV " : "", static_cast<long long>(t), dense, dense_flop / dense / 1e9, sparse[0],
      sparse[1], sparse_flop_max / sparse[0] / 1e9, sparse_flop_max / sparse[1] / 1e9,
      dense / sparse[0], dense / sparse[1]);
  for (void* p : {static_cast<void*>(q), static_cast<void*>(out), static_cast<void*>(sel)})
    cudaFree(p);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--quick") == 0)
        quick = true;
      else if (std::strcmp(argv[i], "--kv-fp8") == 0)
        g_fp8 = true;
      else
        throw std::runtime_error(std::string("unknown option ") + argv[i] + " (--quick, --kv-fp8)");
    }
    cudaDeviceProp prop{};
    Cuda(cudaGetDeviceProperties(&prop, 0), "device");
    std::printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    Cuda(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking), "stream");
    const double hbm = HbmReadGBs();
    std::printf("HBM read %.0f GB/s; cuBLAS bf16 GEMM 8192^3 %.0f TFLOP/s\n", hbm, GemmTflops());
    std::vector<int64_t> ctxs = {8192, 32768};
    if (!quick) ctxs.push_back(131072);
    uint32_t seed = 1000;
    for (int64_t batch : {1, 32})
      for (int64_t ctx : ctxs) Decode(batch, ctx, hbm, seed += 10);
    for (int64_t t : ctxs) Prefill(t, seed += 10, t > 32768 ? 3 : 5);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "m3-bench-cuda-attention: %s\n", e.what());
    return 1;
  }
}
