// Block-scaled (MXFP8 / NVFP4) weights on the GPU against their CPU twins: the decode GEMV
// (kernels/cuda/block_scaled_gemv.cuh) and the prefill path (dequantized chunks on cuBLAS,
// block_scaled_linear.cuh) against kernels/cpu/block_scaled_linear.h at the real projection
// shapes (hidden 6144, q 8192, kv 512 + 512, index 512 + 128, dense 12288, experts 3072, and
// TP-2 slices) for 1, 4, 8, 64, 100 and 300 rows and an 8K-token prefill; CudaDevice::
// UploadQuantizedLinear (codes and scales kept byte for byte, the row scales of fused parts)
// and M3Ops::Linear / MoeExperts on quantized weights against the CPU backend, which
// dequantizes them at upload.
//
// Weights: normal values with per-block magnitudes spread over 2^-6..2^3 (so block scales vary,
// small ones included), quantized by the CPU quantizers; inputs bf16-exact. Tolerances: the GPU
// rounds its output to bf16 (2^-9 relative) and sums in another order in f32, so each element
// must be within 2^-8 |ref| + 1e-3 rms(ref) on the GEMV path; the prefill path keeps the looser
// 2^-8 |ref| + 1e-2 rms(ref) it had when it rounded the dequantized NVFP4 weights times their
// f32 global scale to bf16 (it now dequantizes them exactly and applies the global scale to the
// f32 GEMM output, so its worst errors are about the GEMV path's).
// Ops compare by relative L2 below 1e-2 as the other op tests.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_device.h"
#include "engine/backend/make_device.h"
#include "engine/backend/make_m3_ops.h"
#include "kernels/cpu/block_scaled_linear.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/microscaling.h"
#include "kernels/cuda/block_scaled_gemv.cuh"
#include "kernels/cuda/block_scaled_linear.cuh"
#include "shared/dtype.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

namespace kc = m3::kernels::cuda;
namespace cpu = m3::kernels::cpu;
using engine::backend::Device;
using engine::backend::DeviceTensor;
using engine::backend::LinearWeight;
using engine::backend::M3Ops;
using engine::backend::QuantizedPart;
using engine::backend::WeightFormat;

void Ok(cudaError_t e) {
  REQUIRE_MESSAGE(e == cudaSuccess, cudaGetErrorString(e));
}

// A weight [n, k] quantized on the host, as `parts` source tensors of equal rows (NVFP4: each
// with its own global scale, as fused projections keep them).
struct HostWeight {
  WeightFormat format = WeightFormat::kMxfp8;
  int64_t n = 0, k = 0, parts = 1;
  std::vector<uint8_t> codes, scales;
  std::vector<float> row_scale;  // NVFP4
  bool mx() const { return format == WeightFormat::kMxfp8; }
  int64_t code_cols() const { return mx() ? k : k / 2; }
  int64_t scale_cols() const { return k / (mx() ? 32 : 16); }
  cpu::BlockScaledFormat cpu_format() const {
    return mx() ? cpu::BlockScaledFormat::kMxfp8 : cpu::BlockScaledFormat::kNvfp4;
  }
  std::vector<QuantizedPart> Parts() const {
    std::vector<QuantizedPart> out;
    const int64_t rows = n / parts;
    for (int64_t p = 0; p < parts; ++p) {
      QuantizedPart q;
      const size_t cb = static_cast<size_t>(rows * code_cols()),
                   sb = static_cast<size_t>(rows * scale_cols());
      q.codes = {
          mx() ? DType::kF8E4M3 : DType::kU8, {rows, code_cols()}, codes.data() + p * cb, cb};
      q.scales = {
          mx() ? DType::kU8 : DType::kF8E4M3, {rows, scale_cols()}, scales.data() + p * sb, sb};
      q.global_scale = mx() ? 1.0f : row_scale[static_cast<size_t>(p * rows)];
      out.push_back(q);
    }
    return out;
  }
};

HostWeight MakeWeight(WeightFormat format, int64_t n, int64_t k, uint32_t seed, int64_t parts = 1) {
  HostWeight h;
  h.format = format;
  h.n = n;
  h.k = k;
  h.parts = parts;
  // A counter-based hash (fast at a billion values): uniform in [-0.035, 0.035), each block of
  // 16 times 2^[-6, 3).
  auto hash = [seed](uint64_t i) {
    uint64_t z = i * 0x9e3779b97f4a7c15ull + seed * 0xbf58476d1ce4e5b9ull + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<float>((z ^ (z >> 31)) >> 40) * 0x1p-24f;  // [0, 1)
  };
  std::vector<float> w(static_cast<size_t>(n * k));
  for (int64_t b = 0; b < n * k / 16; ++b) {
    const float m = std::exp2(-6.0f + 9.0f * hash(~static_cast<uint64_t>(b)));
    for (int64_t i = 0; i < 16; ++i)
      w[b * 16 + i] = (hash(static_cast<uint64_t>(b * 16 + i)) - 0.5f) * 0.07f * m;
  }
  h.codes.resize(static_cast<size_t>(n * h.code_cols()));
  h.scales.resize(static_cast<size_t>(n * h.scale_cols()));
  h.row_scale.assign(static_cast<size_t>(n), 1.0f);
  const int64_t rows = n / parts;
  for (int64_t p = 0; p < parts; ++p) {
    float amax = 0.0f;
    for (int64_t i = p * rows * k; i < (p + 1) * rows * k; ++i)
      amax = std::max(amax, std::fabs(w[i]));
    const float global = cpu::Nvfp4GlobalScale(amax * (1.0f + static_cast<float>(p)));
    for (int64_t r = p * rows; r < (p + 1) * rows; ++r) {
      const float* row = w.data() + r * k;
      uint8_t* c = h.codes.data() + r * h.code_cols();
      uint8_t* s = h.scales.data() + r * h.scale_cols();
      if (h.mx()) {
        cpu::QuantizeMxfp8Row(row, k, c, s);
      } else {
        cpu::QuantizeNvfp4Row(row, k, global, c, s);
        h.row_scale[static_cast<size_t>(r)] = global;
      }
    }
  }
  return h;
}

std::vector<float> RandomBf16(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = BF16ToF32(F32ToBF16(u(rng)));
  return v;
}

template <typename T>
struct Dev {
  explicit Dev(size_t count) : n(count) { Ok(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T))); }
  Dev(const T* host, size_t count) : Dev(count) {
    Ok(cudaMemcpy(p, host, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* p = nullptr;
  size_t n;
};

struct GpuWeight {
  explicit GpuWeight(const HostWeight& h)
      : codes(h.codes.data(), h.codes.size()),
        scales(h.scales.data(), h.scales.size()),
        row_scale(h.row_scale.data(), h.row_scale.size()) {
    rows.kind = h.mx() ? kc::WeightKind::kMxfp8 : kc::WeightKind::kNvfp4;
    rows.data = codes.p;
    rows.scales = scales.p;
    rows.row_scale = h.mx() ? nullptr : row_scale.p;
  }
  Dev<uint8_t> codes, scales;
  Dev<float> row_scale;
  kc::ScaledRows rows;
};

// Max over elements of |gpu - ref| / (2^-8 |ref| + rel_rms * rms(ref)): at most 1 passes.
double WorstError(const std::vector<float>& gpu, const std::vector<float>& ref, double rel_rms) {
  double ss = 0.0;
  for (float r : ref) ss += double(r) * r;
  const double rms = std::sqrt(ss / std::max<size_t>(ref.size(), 1));
  double worst = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double bound = std::ldexp(std::fabs(double(ref[i])), -8) + rel_rms * rms;
    worst = std::max(worst, std::fabs(double(gpu[i]) - ref[i]) / bound);
  }
  return worst;
}

struct Gpu {
  Gpu() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return;
    Ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    REQUIRE(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
    cublasSetStream(blas, stream);
  }
  ~Gpu() {
    if (blas) cublasDestroy(blas);
    if (stream) cudaStreamDestroy(stream);
  }
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
};

// y = x W^T on the GPU (bf16 out, read back as float) through BlockScaledLinear.
std::vector<float> GpuLinear(Gpu& g, const GpuWeight& w, const HostWeight& h,
                             const std::vector<float>& x, int64_t m) {
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = F32ToBF16(x[i]);
  Dev<uint16_t> dx(xb.data(), xb.size());
  Dev<uint16_t> dy(static_cast<size_t>(m * h.n));
  const size_t bytes = kc::BlockScaledLinearWorkspaceBytes(m, h.n, h.k, w.rows.kind);
  Dev<uint8_t> ws(bytes);
  kc::BlockScaledLinear(g.blas, reinterpret_cast<const kc::bf16*>(dx.p), m, w.rows, h.n, h.k,
                        nullptr, dy.p, kc::ElemType::kBF16, ws.p, bytes, g.stream);
  Ok(cudaStreamSynchronize(g.stream));
  std::vector<uint16_t> yb(static_cast<size_t>(m * h.n));
  Ok(cudaMemcpy(yb.data(), dy.p, yb.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<float> y(yb.size());
  for (size_t i = 0; i < yb.size(); ++i) y[i] = BF16ToF32(yb[i]);
  return y;
}

struct Shape2 {
  const char* name;
  int64_t n, k;
};

// Every shape at 1 .. 300 rows and an 8K-token prefill in one format. Beyond 8 rows the CPU
// reference covers every 5th weight row (all residues of the 16-row tiles), to stay affordable.
void RealShapes(WeightFormat f) {
  Gpu g;
  if (!g.stream) return;
  const Shape2 shapes[] = {
      {"qkv (8192 + 512 + 512 + 512 + 128) x 6144", 9856, 6144},
      {"qkv TP-2 slice 4928 x 6144", 4928, 6144},
      {"o_proj 6144 x 8192", 6144, 8192},
      {"o_proj TP-2 slice 6144 x 4096", 6144, 4096},
      {"dense gate_up 24576 x 6144", 24576, 6144},
      {"dense down 6144 x 12288", 6144, 12288},
      {"shared / expert gate_up 6144 x 6144", 6144, 6144},
      {"shared / expert down 6144 x 3072", 6144, 3072},
      {"kv 512 x 6144", 512, 6144},
      {"index k 128 x 6144", 128, 6144},
      // The demo model's widths: K not a multiple of a step (partial last steps).
      {"demo 384 x 192", 384, 192},
      {"demo 192 x 96", 192, 96},
  };
  const char* name = f == WeightFormat::kMxfp8 ? "MXFP8" : "NVFP4";
  uint32_t seed = 100;
  for (const Shape2& s : shapes) {
    const HostWeight h = MakeWeight(f, s.n, s.k, ++seed, s.n % 32 == 0 ? 2 : 1);
    const GpuWeight w(h);
    std::vector<float> dense(static_cast<size_t>(h.n * h.k));
    cpu::DequantizeBlockScaled(h.cpu_format(), h.codes.data(), h.scales.data(), h.row_scale.data(),
                               h.n, h.k, dense.data());
    std::vector<int64_t> sample;  // weight rows the reference computes beyond 8 input rows
    for (int64_t r = 0; r < h.n; r += 5) sample.push_back(r);
    std::vector<float> dense_sample(sample.size() * static_cast<size_t>(h.k));
    for (size_t i = 0; i < sample.size(); ++i)
      std::copy_n(dense.data() + sample[i] * h.k, h.k, dense_sample.data() + i * h.k);
    // 100 rows: GEMV passes of 64 and 36 rows; 300: the prefill path (chunks of dequantized
    // rows on cuBLAS; 24576-row weights take three chunks).
    for (const int64_t m : {1, 4, 8, 64, 100, 300}) {
      CAPTURE(s.name);
      CAPTURE(m);
      const std::vector<float> x = RandomBf16(m * h.k, seed * 7 + static_cast<uint32_t>(m));
      const std::vector<float> y = GpuLinear(g, w, h, x, m);
      std::vector<float> ref, got;
      if (m <= 8) {
        ref.resize(static_cast<size_t>(m * h.n));
        cpu::Linear(x.data(), m, h.k, dense.data(), h.n, nullptr, ref.data());
        got = y;
      } else {
        const int64_t ns = static_cast<int64_t>(sample.size());
        ref.resize(static_cast<size_t>(m * ns));
        cpu::Linear(x.data(), m, h.k, dense_sample.data(), ns, nullptr, ref.data());
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c : sample) got.push_back(y[static_cast<size_t>(r * h.n + c)]);
      }
      const double worst = WorstError(got, ref, m <= 100 ? 1e-3 : 1e-2);
      std::printf("  %-6s %-42s m %3lld  worst %.3f  rel L2 %.2e\n", name, s.name,
                  static_cast<long long>(m), worst, RelativeL2(got, ref));
      CHECK(worst <= 1.0);
    }
  }
  // An 8K-token prefill (kv projection: the CPU reference stays affordable).
  const HostWeight h = MakeWeight(f, 512, 6144, 77, 2);
  const GpuWeight w(h);
  const int64_t m = 8192;
  const std::vector<float> x = RandomBf16(m * h.k, 78);
  std::vector<float> ref(static_cast<size_t>(m * h.n));
  cpu::BlockScaledLinear(x.data(), m, h.cpu_format(), h.codes.data(), h.scales.data(),
                         h.row_scale.data(), h.n, h.k, ref.data());
  const std::vector<float> y = GpuLinear(g, w, h, x, m);
  const double worst = WorstError(y, ref, 1e-2);
  std::printf("  %-6s 8192-token prefill 512 x 6144                  worst %.3f\n", name, worst);
  CHECK(worst <= 1.0);
}

TEST_CASE("MXFP8 GEMV and prefill GEMM match the CPU twin at the real shapes") {
  RealShapes(WeightFormat::kMxfp8);
}

TEST_CASE("NVFP4 GEMV and prefill GEMM match the CPU twin at the real shapes") {
  RealShapes(WeightFormat::kNvfp4);
}

// The shared-memory staged GEMV (block_scaled_stages.cuh) where its edges are: a partial last
// 32-row block, few rows (the grid splits K into whole rounds of 8 steps), K of one round or less.
TEST_CASE("the staged BlockScaledGemv matches the CPU twin at partial blocks and K splits") {
  Gpu g;
  if (!g.stream) return;
  const Shape2 shapes[] = {
      {"partial block 200 x 1024", 200, 1024},
      {"few rows 48 x 6144", 48, 6144},
      {"one row tile 16 x 512", 16, 512},
      {"rounds 96 x 1536", 96, 1536},
  };
  for (const WeightFormat f : {WeightFormat::kMxfp8, WeightFormat::kNvfp4}) {
    const char* name = f == WeightFormat::kMxfp8 ? "MXFP8" : "NVFP4";
    uint32_t seed = 500;
    for (const Shape2& s : shapes) {
      const HostWeight h = MakeWeight(f, s.n, s.k, ++seed, 2);
      const GpuWeight w(h);
      std::vector<float> dense(static_cast<size_t>(h.n * h.k));
      cpu::DequantizeBlockScaled(h.cpu_format(), h.codes.data(), h.scales.data(),
                                 h.row_scale.data(), h.n, h.k, dense.data());
      for (const int64_t m : {1, 5, 8}) {
        CAPTURE(name);
        CAPTURE(s.name);
        CAPTURE(m);
        const std::vector<float> x = RandomBf16(m * h.k, seed * 13 + static_cast<uint32_t>(m));
        std::vector<float> ref(static_cast<size_t>(m * h.n));
        cpu::Linear(x.data(), m, h.k, dense.data(), h.n, nullptr, ref.data());
        const double worst = WorstError(GpuLinear(g, w, h, x, m), ref, 1e-3);
        std::printf("  %-6s staged %-28s m %lld  worst %.3f\n", name, s.name,
                    static_cast<long long>(m), worst);
        CHECK(worst <= 1.0);
      }
    }
  }
}

// The register-loaded decode GEMV (M3_SCALED_STAGES=0; the default path above takes the staged
// kernel where the shape allows) in its geometries (M3_BLOCK_SCALED_GEMV_TILES: row tiles per warp
// step with 1-8 rows; M3_NVFP4_HALF=0: NVFP4 in bf16 rather than f16; the benchmark times them)
// against the CPU twin.
TEST_CASE("BlockScaledGemv matches the CPU twin in each of its row-tile geometries") {
  Gpu g;
  if (!g.stream) return;
  const Shape2 shapes[] = {
      {"o_proj TP-2 slice 6144 x 4096", 6144, 4096},
      {"kv 512 x 6144", 512, 6144},
      {"demo 384 x 192", 384, 192},
      {"odd rows 200 x 96", 200, 96},  // a partial 64-row block and a partial last step
  };
  for (const WeightFormat f : {WeightFormat::kMxfp8, WeightFormat::kNvfp4}) {
    const char* name = f == WeightFormat::kMxfp8 ? "MXFP8" : "NVFP4";
    uint32_t seed = 300;
    for (const Shape2& s : shapes) {
      const HostWeight h = MakeWeight(f, s.n, s.k, ++seed, s.n % 32 == 0 ? 2 : 1);
      const GpuWeight w(h);
      std::vector<float> dense(static_cast<size_t>(h.n * h.k));
      cpu::DequantizeBlockScaled(h.cpu_format(), h.codes.data(), h.scales.data(),
                                 h.row_scale.data(), h.n, h.k, dense.data());
      const char* const variants[][2] = {
          {"1", "1"}, {"2", "1"}, {"4", "1"}, {"1", "0"}, {"4", "0"}};
      for (const int64_t m : {1, 3, 8}) {
        const std::vector<float> x = RandomBf16(m * h.k, seed * 11 + static_cast<uint32_t>(m));
        std::vector<float> ref(static_cast<size_t>(m * h.n));
        cpu::Linear(x.data(), m, h.k, dense.data(), h.n, nullptr, ref.data());
        for (const auto& variant : variants) {
          const char* tiles = variant[0];
          const char* half = variant[1];
          if (f == WeightFormat::kMxfp8 && half[0] == '0') continue;  // NVFP4's forms only
          CAPTURE(name);
          CAPTURE(s.name);
          CAPTURE(tiles);
          CAPTURE(half);
          CAPTURE(m);
          setenv("M3_BLOCK_SCALED_GEMV_TILES", tiles, 1);
          setenv("M3_NVFP4_HALF", half, 1);
          setenv("M3_SCALED_STAGES", "0", 1);
          const std::vector<float> y = GpuLinear(g, w, h, x, m);
          unsetenv("M3_BLOCK_SCALED_GEMV_TILES");
          unsetenv("M3_NVFP4_HALF");
          unsetenv("M3_SCALED_STAGES");
          const double worst = WorstError(y, ref, 1e-3);
          std::printf("  %-6s %-32s tiles %s %s m %lld  worst %.3f\n", name, s.name, tiles,
                      half[0] == '0' ? "bf16" : "f16 ", static_cast<long long>(m), worst);
          CHECK(worst <= 1.0);
        }
      }
    }
  }
}

struct Backends {
  std::unique_ptr<Device> cpu = engine::backend::MakeCpuDevice();
  std::unique_ptr<Device> gpu = engine::backend::MakeDevice("cuda");
  std::unique_ptr<M3Ops> cpu_ops = engine::backend::MakeM3Ops(*cpu);
  std::unique_ptr<M3Ops> gpu_ops = engine::backend::MakeM3Ops(*gpu);
};

std::vector<uint8_t> Bytes(Device& d, const DeviceTensor& t) {
  std::vector<uint8_t> v(t.bytes());
  d.Download(t, v.data());
  return v;
}
std::vector<float> Floats(Device& d, const DeviceTensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  d.Download(t, v.data());
  return v;
}
DeviceTensor Act(Device& d, const std::vector<float>& host, Shape shape) {
  DeviceTensor t = d.Alloc(d.activation_dtype(), std::move(shape));
  d.Upload(host.data(), t);
  return t;
}

TEST_CASE("CudaDevice keeps block-scaled Linears quantized; Linear on them matches the CPU") {
  int n_gpus = 0;
  if (cudaGetDeviceCount(&n_gpus) != cudaSuccess || n_gpus == 0) return;
  Backends b;
  for (const WeightFormat f : {WeightFormat::kMxfp8, WeightFormat::kNvfp4}) {
    CAPTURE(engine::backend::WeightFormatName(f));
    const int64_t N = 1024, K = 6144;
    const HostWeight h = MakeWeight(f, N, K, 5, 2);  // two parts (a fused projection)
    const std::vector<QuantizedPart> parts = h.Parts();
    const size_t before = b.gpu->weight_bytes();
    const LinearWeight gw = b.gpu->UploadQuantizedLinear(f, parts, {N, K});
    const LinearWeight cw = b.cpu->UploadQuantizedLinear(f, parts, {N, K});
    REQUIRE(gw.format == f);
    CHECK(!cw.quantized());
    CHECK(gw.shape() == Shape{N, K});
    CHECK(gw.w.dtype == (h.mx() ? DType::kF8E4M3 : DType::kU8));
    CHECK(gw.scales.dtype == (h.mx() ? DType::kU8 : DType::kF8E4M3));
    CHECK(Bytes(*b.gpu, gw.w) == h.codes);
    CHECK(Bytes(*b.gpu, gw.scales) == h.scales);
    if (h.mx()) {
      CHECK(!gw.row_scale);
    } else {
      REQUIRE(gw.row_scale);
      CHECK(Floats(*b.gpu, gw.row_scale) == h.row_scale);
      CHECK(h.row_scale.front() != h.row_scale.back());  // the parts kept their own scales
    }
    CHECK(b.gpu->weight_bytes() - before == gw.bytes());
    // No bf16 copy: about half (MXFP8) or a quarter (NVFP4) of bf16's bytes.
    CHECK(static_cast<double>(gw.bytes()) < (h.mx() ? 0.55 : 0.3) * static_cast<double>(2 * N * K));
    for (const int64_t m : {1, 8, 200}) {
      CAPTURE(m);
      const std::vector<float> xh = RandomBf16(m * K, 9 + static_cast<uint32_t>(m));
      const DeviceTensor xc = Act(*b.cpu, xh, {m, K}), xg = Act(*b.gpu, xh, {m, K});
      const DeviceTensor yc = b.cpu->Alloc(DType::kF32, {m, N});
      const DeviceTensor yg = b.gpu->Alloc(DType::kBF16, {m, N});
      b.cpu_ops->Linear(xc, cw, nullptr, yc);
      b.gpu_ops->Linear(xg, gw, nullptr, yg);
      const double e = RelativeL2(Floats(*b.gpu, yg), Floats(*b.cpu, yc));
      std::printf("  Linear %s 1024 x 6144, %lld rows: rel L2 %.3e\n",
                  std::string(engine::backend::WeightFormatName(f)).c_str(),
                  static_cast<long long>(m), e);
      CHECK(e < 1e-2);
    }
  }
}

// One MoE layer on the CPU backend (experts dequantized at upload) and the GPU (kept quantized).
struct MoeCase {
  int64_t rows;
  bool remote;        // every third pick another rank's (-1)
  const char* chunk;  // M3_MOE_DEQUANT_CHUNK_EXPERTS, or null
};

void RunMoe(Backends& b, WeightFormat f, int64_t E, int64_t H, int64_t I,
            std::initializer_list<MoeCase> cases) {
  const int64_t topk = 4;
  const engine::backend::SwigluParams sp{1.702f, 7.0f};
  const char* name = f == WeightFormat::kMxfp8 ? "MXFP8" : "NVFP4";
  // Each expert a part of its own (NVFP4: its own global scale, as checkpoints store them).
  const HostWeight gu = MakeWeight(f, E * 2 * I, H, 21, E);
  const HostWeight dn = MakeWeight(f, E * H, I, 22, E);
  const LinearWeight gu_gpu = b.gpu->UploadQuantizedLinear(f, gu.Parts(), {E, 2 * I, H});
  const LinearWeight dn_gpu = b.gpu->UploadQuantizedLinear(f, dn.Parts(), {E, H, I});
  const LinearWeight gu_cpu = b.cpu->UploadQuantizedLinear(f, gu.Parts(), {E, 2 * I, H});
  const LinearWeight dn_cpu = b.cpu->UploadQuantizedLinear(f, dn.Parts(), {E, H, I});
  REQUIRE(gu_gpu.quantized());
  for (const MoeCase& r : cases) {
    CAPTURE(name);
    CAPTURE(r.rows);
    CAPTURE(r.remote);
    std::mt19937 rng(static_cast<uint32_t>(40 + r.rows));
    std::vector<int32_t> ids_host(r.rows * topk);
    std::vector<float> w_host(r.rows * topk);
    for (int64_t row = 0; row < r.rows; ++row) {
      std::vector<int32_t> e(E);
      for (int64_t i = 0; i < E; ++i) e[i] = static_cast<int32_t>(i);
      std::shuffle(e.begin(), e.end(), rng);
      for (int64_t j = 0; j < topk; ++j) {
        const int64_t p = row * topk + j;
        ids_host[p] = r.remote && p % 3 == 0 ? -1 : e[j];
        w_host[p] = 0.2f + 0.1f * static_cast<float>(j);
      }
    }
    auto ints = [&](Device& d) {
      DeviceTensor t = d.Alloc(DType::kI32, {r.rows, topk});
      d.Upload(ids_host.data(), t);
      return t;
    };
    auto f32 = [&](Device& d) {
      DeviceTensor t = d.Alloc(DType::kF32, {r.rows, topk});
      d.Upload(w_host.data(), t);
      return t;
    };
    const std::vector<float> xh = RandomBf16(r.rows * H, 50), oh = RandomBf16(r.rows * H, 51);
    const DeviceTensor ids_c = ints(*b.cpu), ids_g = ints(*b.gpu);
    const DeviceTensor w_c = f32(*b.cpu), w_g = f32(*b.gpu);
    const DeviceTensor x_c = Act(*b.cpu, xh, {r.rows, H}), x_g = Act(*b.gpu, xh, {r.rows, H});
    const DeviceTensor o_c = Act(*b.cpu, oh, {r.rows, H}), o_g = Act(*b.gpu, oh, {r.rows, H});
    if (r.chunk) setenv("M3_MOE_DEQUANT_CHUNK_EXPERTS", r.chunk, 1);
    b.cpu_ops->MoeExperts(x_c, ids_c, w_c, gu_cpu, dn_cpu, sp, 2.5f, o_c);
    b.gpu_ops->MoeExperts(x_g, ids_g, w_g, gu_gpu, dn_gpu, sp, 2.5f, o_g);
    const std::vector<float> got = Floats(*b.gpu, o_g);
    if (r.chunk) unsetenv("M3_MOE_DEQUANT_CHUNK_EXPERTS");
    const double e = RelativeL2(got, Floats(*b.cpu, o_c));
    std::printf("  MoeExperts %s %lld x %lld x %lld, %4lld rows%s%s: rel L2 %.3e\n", name,
                static_cast<long long>(E), static_cast<long long>(I), static_cast<long long>(H),
                static_cast<long long>(r.rows), r.remote ? ", remote picks" : "",
                r.chunk ? ", chunks of 3 experts" : "", e);
    CHECK(e < 1e-2);
  }
}

TEST_CASE("MoeExperts on MXFP8 and NVFP4 experts matches the CPU on the dequantized weights") {
  int n_gpus = 0;
  if (cudaGetDeviceCount(&n_gpus) != cudaSuccess || n_gpus == 0) return;
  Backends b;
  for (const WeightFormat f : {WeightFormat::kMxfp8, WeightFormat::kNvfp4}) {
    // Real widths (8 of the 128 experts of 3072, hidden 6144): 1, 2 and 8 rows, 8 with remote
    // picks, 160 rows (640 picks, ~80 per expert: several passes): the block-scaled GEMVs.
    RunMoe(b, f, 8, 6144, 3072,
           {{1, false, nullptr},
            {2, false, nullptr},
            {8, false, nullptr},
            {8, true, nullptr},
            {160, false, nullptr}});
    // Beyond kMoeGemvScaledMaxPicks (600 rows, 2400 picks; narrower experts keep the CPU
    // reference affordable): experts dequantized to bf16 in one chunk and in chunks of 3.
    RunMoe(b, f, 16, 1024, 512, {{600, false, nullptr}, {600, true, "3"}});
    // The demo model's widths (hidden 192, experts of 96: partial last steps), on the GEMVs.
    RunMoe(b, f, 8, 192, 96, {{1, false, nullptr}, {5, true, nullptr}, {40, false, nullptr}});
  }
}

// The register-loaded MoE kernels (M3_SCALED_STAGES=0) in their geometries
// (M3_MOE_SCALED_DOWN_TILES: down row tiles per block;
// M3_MOE_SCALED_GATEUP_PAIRS: gate / up tile pairs per block; M3_NVFP4_HALF=0: NVFP4 in bf16
// rather than f16; the benchmark times them), as the defaults above.
TEST_CASE("MoeExperts on block-scaled experts matches the CPU in each down-kernel geometry") {
  int n_gpus = 0;
  if (cudaGetDeviceCount(&n_gpus) != cudaSuccess || n_gpus == 0) return;
  Backends b;
  // {down tiles, NVFP4 f16 form, gate_up pairs}
  const char* const variants[][3] = {
      {"1", "1", "1"}, {"4", "1", "2"}, {"1", "0", "1"}, {"2", "0", "2"}};
  for (const auto& variant : variants) {
    CAPTURE(variant[0]);
    CAPTURE(variant[1]);
    CAPTURE(variant[2]);
    setenv("M3_MOE_SCALED_DOWN_TILES", variant[0], 1);
    setenv("M3_NVFP4_HALF", variant[1], 1);
    setenv("M3_MOE_SCALED_GATEUP_PAIRS", variant[2], 1);
    setenv("M3_SCALED_STAGES", "0", 1);
    for (const WeightFormat f : {WeightFormat::kMxfp8, WeightFormat::kNvfp4}) {
      if (f == WeightFormat::kMxfp8 && variant[1][0] == '0') continue;  // NVFP4's forms only
      // Narrower experts than the real ones keep the CPU side short; the demo widths' partial
      // steps.
      RunMoe(b, f, 8, 1024, 512, {{1, false, nullptr}, {8, true, nullptr}, {40, false, nullptr}});
      RunMoe(b, f, 8, 192, 96, {{5, true, nullptr}, {40, false, nullptr}});
    }
    unsetenv("M3_MOE_SCALED_DOWN_TILES");
    unsetenv("M3_NVFP4_HALF");
    unsetenv("M3_MOE_SCALED_GATEUP_PAIRS");
    unsetenv("M3_SCALED_STAGES");
  }
}

}  // namespace
}  // namespace m3::test
