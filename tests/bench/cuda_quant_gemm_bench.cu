// m3-bench-quant-gemm: the block-scaled (MXFP8 / NVFP4) weight kernels against cuBLAS bf16 at
// the real shapes, with the GPU's HBM read bandwidth and its bf16 dense GEMM peak measured in the
// same run (issue 36's goals):
//  - decode GEMV (kernels/cuda/block_scaled_gemv.cuh) at batch 1, 2, 4, 8 (and 16, 64) for the
//    projections of one GPU (TP-1) and their TP-2 / TP-4 slices: time, weight bytes read per second
//    and that as a % of the measured HBM bandwidth (goals: MXFP8 >= 80 %, NVFP4 >= 70 %), beside
//    cuBLAS bf16;
//  - one MoE layer's decode (128 experts of 3072, top-4, hidden 6144, random routing) at batch 1
//    and 8 in bf16 / MXFP8 / NVFP4 (goals: >= 1.7x MXFP8, >= 2.5x NVFP4 faster than bf16);
//  - an 8K-token prefill GEMM 8192 x 24576 x 6144 in each format as a % of the bf16 dense peak
//    (cuBLAS, 8192^3) (goal >= 60 %).
// Weights are random codes and scales made on the device, several copies rotated so that no
// call finds its weights in L2; each figure is the median over replays of a CUDA graph of
// `reps` calls (per call: GPU time as a graph-replayed decode step sees it).
// Usage: m3-bench-quant-gemm [--quick]   (--quick: fewer shapes and replays, about a minute)
// Beside each table the kernels' other geometries are timed for comparison (environment
// overrides the kernels read at launch, struct Variant): "former" (the kernels before the row
// tiles: M3_BLOCK_SCALED_GEMV_TILES=1 M3_MOE_SCALED_DOWN_TILES=1 M3_NVFP4_HALF=0
// M3_MOE_SCALED_GATEUP_PAIRS=1), "regs" (the register-loaded kernels' defaults instead of the
// shared-memory staged ones, M3_SCALED_STAGES=0; every variant below is one of the register
// kernels), "T2" (2 GEMV row tiles per warp step instead of 4), "dn4" (4 MoE down
// row tiles per block instead of 2), "bf16 form" (NVFP4 dequantized to bf16 rather than f16,
// M3_NVFP4_HALF=0).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/block_scaled_gemv.cuh"
#include "kernels/cuda/block_scaled_linear.cuh"
#include "kernels/cuda/moe_experts.cuh"
#include "tests/bench/cuda_bench_kernels.cuh"

namespace {

namespace kc = m3::kernels::cuda;
using kc::bf16;
using kc::ScaledRows;
using kc::WeightKind;

cudaStream_t g_stream = nullptr;
cublasHandle_t g_blas = nullptr;
bool g_quick = false;

// The kernels' geometries the tables compare (environment overrides the kernels read at each
// launch; null: unset, the default). "former": the register kernels before the row tiles.
struct Variant {
  const char* gemv_tiles;  // M3_BLOCK_SCALED_GEMV_TILES
  const char* down_tiles;  // M3_MOE_SCALED_DOWN_TILES
  const char* stages;      // M3_SCALED_STAGES
  const char* nv_half;     // M3_NVFP4_HALF
  const char* gate_pairs;  // M3_MOE_SCALED_GATEUP_PAIRS
};
constexpr int kVars = 5;
constexpr Variant kDefault{nullptr, nullptr, nullptr, nullptr, nullptr};
constexpr Variant kFormer{"1", "1", "0", "0", "1"};
constexpr Variant kRegisters{nullptr, nullptr, "0", nullptr, nullptr};
constexpr Variant kGemvTiles2{"2", nullptr, "0", nullptr, nullptr};
constexpr Variant kDownTiles4{nullptr, "4", "0", nullptr, nullptr};
constexpr Variant kBf16Form{nullptr, nullptr, "0", "0", nullptr};

// Runs `f` under the variant's environment, then restores the environment.
template <typename F>
auto Under(const Variant& v, F&& f) {
  struct Saved {
    const char* name;
    bool had;
    std::string value;
  } saved[kVars] = {{"M3_BLOCK_SCALED_GEMV_TILES", false, ""},
                    {"M3_MOE_SCALED_DOWN_TILES", false, ""},
                    {"M3_SCALED_STAGES", false, ""},
                    {"M3_NVFP4_HALF", false, ""},
                    {"M3_MOE_SCALED_GATEUP_PAIRS", false, ""}};
  const char* const want[kVars] = {v.gemv_tiles, v.down_tiles, v.stages, v.nv_half, v.gate_pairs};
  for (int i = 0; i < kVars; ++i) {
    if (const char* old = std::getenv(saved[i].name)) {
      saved[i].had = true;
      saved[i].value = old;
    }
    if (want[i])
      setenv(saved[i].name, want[i], 1);
    else
      unsetenv(saved[i].name);
  }
  struct Restore {
    Saved* s;
    ~Restore() {
      for (int i = 0; i < kVars; ++i) {
        if (s[i].had)
          setenv(s[i].name, s[i].value.c_str(), 1);
        else
          unsetenv(s[i].name);
      }
    }
  } restore{saved};
  return f();
}

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

// Random bytes in [lo, lo + span) (codes: span 256 minus the NaN codes; scales: a narrow range
// of realistic exponents), so the kernels see the numbers checkpoints hold.
__global__ void FillBytes(uint8_t* p, size_t n, uint64_t seed, uint32_t lo, uint32_t span,
                          bool e4m3_codes) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint32_t b = lo + Hash(seed * 0x9e3779b97f4a7c15ull + i) % span;
    if (e4m3_codes && (b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes
    p[i] = static_cast<uint8_t>(b);
  }
}
void Bytes(uint8_t* p, size_t n, uint64_t seed, uint32_t lo, uint32_t span, bool codes) {
  FillBytes<<<1024, 256, 0, g_stream>>>(p, n, seed, lo, span, codes);
  Cuda(cudaGetLastError(), "fill");
}

struct Buffer {
  explicit Buffer(size_t bytes) : n(bytes) {
    Cuda(cudaMalloc(&p, std::max<size_t>(n, 16)), "alloc");
  }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
  void* p = nullptr;
  size_t n;
};

// A weight [n, k] in one format, on the device.
struct Weight {
  Weight(WeightKind kind, int64_t n, int64_t k, uint64_t seed) : kind(kind), n(n), k(k) {
    if (kind == WeightKind::kBf16) {
      data = std::make_unique<Buffer>(static_cast<size_t>(n * k) * 2);
      m3::bench::FillUniformBf16(data->p, static_cast<size_t>(n * k), seed, 0.02f, 0.0f, g_stream);
      return;
    }
    const bool mx = kind == WeightKind::kMxfp8;
    const size_t cb = static_cast<size_t>(mx ? n * k : n * k / 2);
    const size_t sb = static_cast<size_t>(n * k / (mx ? 32 : 16));
    data = std::make_unique<Buffer>(cb);
    scales = std::make_unique<Buffer>(sb);
    Bytes(data->as<uint8_t>(), cb, seed, 0, 256, mx);
    if (mx)
      Bytes(scales->as<uint8_t>(), sb, seed + 1, 112, 8, false);  // 2^-15 .. 2^-8
    else
      Bytes(scales->as<uint8_t>(), sb, seed + 1, 0x30, 0x28, false);  // e4m3 0.5 .. 448-ish
    if (!mx) {
      row_scale = std::make_unique<Buffer>(static_cast<size_t>(n) * 4);
      m3::bench::FillUniformF32(row_scale->as<float>(), static_cast<size_t>(n), seed + 2, 1e-5f,
                                2e-5f, g_stream);
    }
  }
  ScaledRows rows() const {
    return {kind, data->p, scales ? scales->as<uint8_t>() : nullptr,
            row_scale ? row_scale->as<float>() : nullptr};
  }
  size_t bytes() const {
    return data->n + (scales ? scales->n : 0) + (row_scale ? row_scale->n : 0);
  }
  WeightKind kind;
  int64_t n, k;
  std::unique_ptr<Buffer> data, scales, row_scale;
};

// Median GPU milliseconds per call of `call(i)` (i: the call's index, to rotate inputs) over
// `trials` replays of a graph recording `reps` calls.
double TimeGraph(const std::function<void(int)>& call, int reps, int trials) {
  call(0);  // first use: lazy setup outside the recording
  Cuda(cudaStreamSynchronize(g_stream), "warm-up");
  cudaGraph_t graph;
  Cuda(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < reps; ++i) call(i);
  Cuda(cudaStreamEndCapture(g_stream, &graph), "capture");
  cudaGraphExec_t exec;
  Cuda(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  Cuda(cudaGraphLaunch(exec, g_stream), "replay");
  std::vector<double> ms;
  for (int t = 0; t < trials; ++t) {
    cudaEventRecord(a, g_stream);
    Cuda(cudaGraphLaunch(exec, g_stream), "replay");
    cudaEventRecord(b, g_stream);
    Cuda(cudaEventSynchronize(b), "replay");
    float m = 0;
    cudaEventElapsedTime(&m, a, b);
    ms.push_back(m / reps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

// Median milliseconds of `call` timed eagerly (calls that synchronize with the host).
double TimeEager(const std::function<void()>& call, int reps) {
  call();
  Cuda(cudaStreamSynchronize(g_stream), "warm-up");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> ms;
  for (int t = 0; t < reps; ++t) {
    cudaEventRecord(a, g_stream);
    call();
    cudaEventRecord(b, g_stream);
    Cuda(cudaEventSynchronize(b), "timing");
    float m = 0;
    cudaEventElapsedTime(&m, a, b);
    ms.push_back(m);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

double HbmBandwidth() {
  const size_t bytes = size_t{4} << 30;
  Buffer buf(bytes);
  Buffer sink(m3::bench::ReadSinkWords() * 4);
  Cuda(cudaMemsetAsync(buf.p, 1, bytes, g_stream), "memset");
  const double ms =
      TimeEager([&] { m3::bench::StreamRead(buf.p, bytes, sink.as<uint32_t>(), g_stream); }, 20);
  return static_cast<double>(bytes) / (ms * 1e-3);
}

// y = x W^T in cuBLAS bf16 (column-major y^T = W x^T), y bf16.
void CublasLinear(const bf16* x, int64_t m, const bf16* w, int64_t n, int64_t k, bf16* y) {
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s =
      cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                   static_cast<int>(k), &alpha, w, CUDA_R_16BF, static_cast<int>(k), x, CUDA_R_16BF,
                   static_cast<int>(k), &beta, y, CUDA_R_16BF, static_cast<int>(n),
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasGemmEx failed");
}

struct Shape {
  const char* name;
  int64_t n, k;
};

// Copies of a weight so the rotation spans at least 4x L2 (no call finds its weights cached).
int CopiesFor(size_t bytes) {
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  const size_t want = std::max<size_t>(size_t{4} * static_cast<size_t>(l2), size_t{256} << 20);
  return static_cast<int>(std::clamp<size_t>((want + bytes - 1) / bytes, 1, 16));
}

void DecodeGemv(double hbm) {
  std::vector<Shape> shapes = {
      {"qkv 9856x6144", 9856, 6144},
      {"o 6144x8192", 6144, 8192},
      {"dense gate_up 24576x6144", 24576, 6144},
      {"dense down 6144x12288", 6144, 12288},
      {"shared gate_up 6144x6144", 6144, 6144},
      {"shared down 6144x3072", 6144, 3072},
      {"lm_head 200064x6144", 200064, 6144},
      {"TP2 qkv 4928x6144", 4928, 6144},
      {"TP2 o 6144x4096", 6144, 4096},
      {"TP2 gate_up 12288x6144", 12288, 6144},
      {"TP2 down 6144x6144", 6144, 6144},
      {"TP2 lm_head 100032x6144", 100032, 6144},
      {"TP4 qkv 2464x6144", 2464, 6144},
      {"TP4 o 6144x2048", 6144, 2048},
      {"TP4 lm_head 50016x6144", 50016, 6144},
  };
  if (g_quick) shapes.resize(3);
  const std::vector<int64_t> batches =
      g_quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 2, 4, 8, 16, 64};
  std::printf("\n== decode GEMV: us per call, weight GB/s, %% of HBM %.0f GB/s ==\n", hbm / 1e9);
  std::printf("%-26s %5s | %9s %6s | %9s %6s %6s | %9s %6s %6s | %23s | %31s\n", "shape", "batch",
              "bf16 us", "%HBM", "MXFP8 us", "%HBM", "x bf16", "NVFP4 us", "%HBM", "x bf16",
              "MX former/regs/T2 us", "NV former/regs/T2/bf16 form us");
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    const int64_t max_m = batches.back();
    Buffer x(static_cast<size_t>(max_m * s.k) * 2), y(static_cast<size_t>(max_m * s.n) * 4);
    m3::bench::FillUniformBf16(x.p, static_cast<size_t>(max_m * s.k), seed++, 1.0f, 0.0f, g_stream);
    std::vector<std::unique_ptr<Weight>> w[3];
    const WeightKind kinds[3] = {WeightKind::kBf16, WeightKind::kMxfp8, WeightKind::kNvfp4};
    for (int f = 0; f < 3; ++f) {
      const Weight probe(kinds[f], 16, s.k, 0);
      const size_t bytes = probe.bytes() / 16 * static_cast<size_t>(s.n);
      for (int c = 0, n = CopiesFor(bytes); c < n; ++c)
        w[f].push_back(std::make_unique<Weight>(kinds[f], s.n, s.k, seed++));
    }
    const Variant variants[5] = {kDefault, kFormer, kRegisters, kGemvTiles2, kBf16Form};
    size_t ws_bytes = 0;
    for (const Variant& v : variants)
      for (int64_t m : batches)
        for (int f = 1; f < 3; ++f)
          ws_bytes = std::max(ws_bytes, Under(v, [&] {
                                return kc::BlockScaledGemvWorkspaceBytes(m, s.n, s.k, kinds[f]);
                              }));
    Buffer ws(ws_bytes);
    for (int64_t m : batches) {
      double ms[3], alt[3][4] = {};
      auto time = [&](int f) {
        const auto& copies = w[f];
        const int reps = g_quick ? 20 : 40;
        return TimeGraph(
            [&](int i) {
              const Weight& wt = *copies[static_cast<size_t>(i) % copies.size()];
              if (f == 0)
                CublasLinear(x.as<bf16>(), m, wt.data->as<bf16>(), s.n, s.k, y.as<bf16>());
              else
                kc::BlockScaledGemv(x.as<bf16>(), m, wt.rows(), s.n, s.k, y.p, kc::ElemType::kBF16,
                                    ws.p, ws.n, g_stream);
            },
            reps, g_quick ? 5 : 11);
      };
      for (int f = 0; f < 3; ++f) ms[f] = Under(kDefault, [&] { return time(f); });
      if (m <= 8)
        for (int f = 1; f < 3; ++f)
          for (int v = 0; v < (f == 2 ? 4 : 3); ++v)
            alt[f][v] = Under(variants[v + 1], [&] { return time(f); });
      auto pct = [&](int f) {
        return 100.0 * static_cast<double>(w[f][0]->bytes()) / (ms[f] * 1e-3) / hbm;
      };
      std::printf(
          "%-26s %5lld | %9.1f %5.1f%% | %9.1f %5.1f%% %5.2fx | %9.1f %5.1f%% %5.2fx "
          "| %7.1f %7.1f %7.1f | %7.1f %7.1f %7.1f %7.1f\n",
          s.name, static_cast<long long>(m), ms[0] * 1e3, pct(0), ms[1] * 1e3, pct(1),
          ms[0] / ms[1], ms[2] * 1e3, pct(2), ms[0] / ms[2], alt[1][0] * 1e3, alt[1][1] * 1e3,
          alt[1][2] * 1e3, alt[2][0] * 1e3, alt[2][1] * 1e3, alt[2][2] * 1e3, alt[2][3] * 1e3);
    }
  }
}

void MoeDecode() {
  const int64_t E = 128, I = 3072, H = 6144, K = 4;
  std::printf("\n== one MoE layer's decode: %lld experts of %lld, top-%lld, hidden %lld ==\n",
              static_cast<long long>(E), static_cast<long long>(I), static_cast<long long>(K),
              static_cast<long long>(H));
  const WeightKind kinds[3] = {WeightKind::kBf16, WeightKind::kMxfp8, WeightKind::kNvfp4};
  std::printf("%5s | %10s | %10s %6s | %10s %6s | %26s | %35s\n", "batch", "bf16 us", "MXFP8 us",
              "x bf16", "NVFP4 us", "x bf16", "MX former/regs/dn4 us",
              "NV former/regs/dn4/bf16 form us");
  const int kRoutings = 16;
  for (const int64_t rows : {int64_t{1}, int64_t{8}}) {
    std::mt19937 rng(static_cast<uint32_t>(rows));
    std::vector<int32_t> ids(static_cast<size_t>(kRoutings * rows * K));
    for (int r = 0; r < kRoutings * rows; ++r) {
      std::vector<int32_t> e(E);
      for (int64_t i = 0; i < E; ++i) e[i] = static_cast<int32_t>(i);
      std::shuffle(e.begin(), e.end(), rng);
      for (int64_t j = 0; j < K; ++j) ids[r * K + j] = e[j];
    }
    Buffer dids(ids.size() * 4), wts(ids.size() * 4);
    Cuda(cudaMemcpy(dids.p, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice), "ids");
    m3::bench::FillUniformF32(wts.as<float>(), ids.size(), 3, 0.1f, 0.25f, g_stream);
    Buffer x(static_cast<size_t>(rows * H) * 2), out(static_cast<size_t>(rows * H) * 2);
    m3::bench::FillUniformBf16(x.p, static_cast<size_t>(rows * H), 4, 1.0f, 0.0f, g_stream);
    m3::bench::FillUniformBf16(out.p, static_cast<size_t>(rows * H), 5, 1.0f, 0.0f, g_stream);
    kc::MoeExpertsDims d;
    d.experts = E;
    d.inter = I;
    d.hidden = H;
    d.topk = K;
    double ms[3], alt[3][4] = {};
    const Variant variants[4] = {kFormer, kRegisters, kDownTiles4, kBf16Form};
    for (int f = 0; f < 3; ++f) {
      // One layer's experts in this format at a time (bf16: 14.5 GB).
      const Weight gu(kinds[f], E * 2 * I, H, 10 + f), dn(kinds[f], E * H, I, 20 + f);
      const size_t ws_bytes =
          std::max(kc::MoeExpertsWorkspaceBytes(rows, d),
                   kc::MoeExpertsScaledWorkspaceBytes(rows, d, kinds[f], kinds[f]));
      Buffer ws(ws_bytes);
      auto time = [&] {
        return TimeGraph(
            [&](int i) {
              const int64_t off = (i % kRoutings) * rows * K;
              kc::MoeGroupedExpertsScaled(g_blas, x.as<bf16>(), rows, dids.as<int32_t>() + off,
                                          wts.as<float>() + off, kc::ElemType::kF32, gu.rows(),
                                          dn.rows(), d, out.as<bf16>(), g_stream, {ws.p, ws.n});
            },
            g_quick ? 16 : 32, g_quick ? 5 : 11);
      };
      ms[f] = Under(kDefault, time);
      if (f > 0)
        for (int v = 0; v < (f == 2 ? 4 : 3); ++v) alt[f][v] = Under(variants[v], time);
    }
    std::printf(
        "%5lld | %10.1f | %10.1f %5.2fx | %10.1f %5.2fx | %8.1f %8.1f %8.1f | %8.1f %8.1f %8.1f "
        "%8.1f\n",
        static_cast<long long>(rows), ms[0] * 1e3, ms[1] * 1e3, ms[0] / ms[1], ms[2] * 1e3,
        ms[0] / ms[2], alt[1][0] * 1e3, alt[1][1] * 1e3, alt[1][2] * 1e3, alt[2][0] * 1e3,
        alt[2][1] * 1e3, alt[2][2] * 1e3, alt[2][3] * 1e3);
  }
}

void Prefill() {
  const int64_t M = 8192, N = 24576, K = 6144;
  std::printf("\n== prefill GEMM %lld x %lld x %lld (TFLOP/s; %% of the bf16 dense peak) ==\n",
              static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K));
  // The peak: cuBLAS bf16 at 8192^3.
  double peak = 0.0;
  {
    const int64_t S = 8192;
    Buffer a(static_cast<size_t>(S * S) * 2), b(static_cast<size_t>(S * S) * 2),
        c(static_cast<size_t>(S * S) * 2);
    m3::bench::FillUniformBf16(a.p, static_cast<size_t>(S * S), 1, 1.0f, 0.0f, g_stream);
    m3::bench::FillUniformBf16(b.p, static_cast<size_t>(S * S), 2, 0.02f, 0.0f, g_stream);
    const double ms = TimeGraph(
        [&](int) { CublasLinear(a.as<bf16>(), S, b.as<bf16>(), S, S, c.as<bf16>()); }, 5, 7);
    peak = 2.0 * S * S * S / (ms * 1e-3) / 1e12;
    std::printf("bf16 dense peak (cuBLAS 8192^3): %.0f TFLOP/s\n", peak);
  }
  Buffer x(static_cast<size_t>(M * K) * 2), y(static_cast<size_t>(M * N) * 2);
  m3::bench::FillUniformBf16(x.p, static_cast<size_t>(M * K), 7, 1.0f, 0.0f, g_stream);
  const double flop = 2.0 * M * N * K;
  const WeightKind kinds[3] = {WeightKind::kBf16, WeightKind::kMxfp8, WeightKind::kNvfp4};
  const char* names[3] = {"bf16 (cuBLAS)", "MXFP8 (dequantized chunks + cuBLAS)",
                          "NVFP4 (dequantized chunks + cuBLAS)"};
  for (int f = 0; f < 3; ++f) {
    const Weight w(kinds[f], N, K, 30 + f);
    const size_t ws_bytes = f == 0 ? 0 : kc::BlockScaledLinearWorkspaceBytes(M, N, K, kinds[f]);
    Buffer ws(ws_bytes);
    const double ms = TimeGraph(
        [&](int) {
          if (f == 0)
            CublasLinear(x.as<bf16>(), M, w.data->as<bf16>(), N, K, y.as<bf16>());
          else
            kc::BlockScaledLinear(g_blas, x.as<bf16>(), M, w.rows(), N, K, nullptr, y.p,
                                  kc::ElemType::kBF16, ws.p, ws.n, g_stream);
        },
        3, 7);
    const double tflops = flop / (ms * 1e-3) / 1e12;
    std::printf("%-38s %8.3f ms %6.0f TFLOP/s %5.1f%% of peak\n", names[f], ms, tflops,
                100.0 * tflops / peak);
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      g_quick = true;
    } else {
      std::fprintf(stderr, "usage: m3-bench-quant-gemm [--quick]\n");
      return 2;
    }
  }
  try {
    cudaDeviceProp prop{};
    Cuda(cudaGetDeviceProperties(&prop, 0), "device");
    std::printf("m3-bench-quant-gemm on %s (%d SMs, L2 %d MB)\n", prop.name,
                prop.multiProcessorCount, prop.l2CacheSize >> 20);
    Cuda(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking), "stream");
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cuBLAS");
    cublasSetStream(g_blas, g_stream);
    Buffer blas_ws(size_t{32} << 20);  // fixed: the graphs keep its address
    cublasSetWorkspace(g_blas, blas_ws.p, blas_ws.n);
    const double hbm = HbmBandwidth();
    std::printf("HBM read bandwidth (streaming read of 4 GiB): %.0f GB/s\n", hbm / 1e9);
    DecodeGemv(hbm);
    MoeDecode();
    Prefill();
    cublasDestroy(g_blas);
    cudaStreamDestroy(g_stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "m3-bench-quant-gemm: %s\n", e.what());
    return 1;
  }
  return 0;
}
