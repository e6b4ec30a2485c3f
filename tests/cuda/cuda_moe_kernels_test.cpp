// The grouped MoE expert kernels (kernels/cuda/moe_experts.cuh) against their CPU twin
// (kernels/cpu/moe_experts.h) at decode and prefill sizes: many rows, uneven expert loads (a
// few experts take most picks), experts with no rows, through every GPU path M3_MOE_GEMM can
// force (the device-grouped GEMV kernels, one cuBLAS GEMV per pick, and after the host's
// counting sort the padded batched GEMMs, the grouped cuBLAS call and the per-expert loop), also
// with picks of another rank's experts (negative ids, expert parallelism), which add nothing.
// Inputs are bf16-exact so both sides read identical numbers; the GPU keeps bf16 intermediates,
// hence the relative L2 bound of bf16 rounding.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/moe_experts.h"
#include "kernels/cuda/moe_expert_gemv.cuh"
#include "kernels/cuda/moe_experts.cuh"
#include "shared/dtype.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

namespace kc = m3::kernels::cuda;

void Ok(cudaError_t e) {
  REQUIRE_MESSAGE(e == cudaSuccess, cudaGetErrorString(e));
}

std::vector<float> RandomBf16(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = BF16ToF32(F32ToBF16(u(rng)));
  return v;
}

// A device copy of `host` as bf16 (exact: the values are bf16-rounded already).
struct DeviceBf16 {
  explicit DeviceBf16(const std::vector<float>& host) {
    std::vector<uint16_t> b(host.size());
    for (size_t i = 0; i < host.size(); ++i) b[i] = F32ToBF16(host[i]);
    Ok(cudaMalloc(&p, std::max<size_t>(b.size(), 1) * 2));
    Ok(cudaMemcpy(p, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  }
  ~DeviceBf16() { cudaFree(p); }
  std::vector<float> Get(size_t n) const {
    std::vector<uint16_t> b(n);
    Ok(cudaMemcpy(b.data(), p, n * 2, cudaMemcpyDeviceToHost));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) f[i] = BF16ToF32(b[i]);
    return f;
  }
  kc::bf16* get() const { return static_cast<kc::bf16*>(p); }
  void* p = nullptr;
};

template <typename T>
struct DeviceArray {
  explicit DeviceArray(const std::vector<T>& host) {
    Ok(cudaMalloc(&p, std::max<size_t>(host.size(), 1) * sizeof(T)));
    Ok(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { cudaFree(p); }
  T* p = nullptr;
};

// Row r's top-k distinct experts, drawn with weight (e + 1)^-skew among the first `used`
// experts (the rest get no rows); routing weights positive and summing to 1.
void Route(int64_t rows, int64_t topk, int64_t used, double skew, uint32_t seed,
           std::vector<int32_t>& ids, std::vector<float>& weights) {
  std::mt19937 rng(seed);
  std::vector<double> p(used);
  for (int64_t e = 0; e < used; ++e) p[e] = std::pow(double(e + 1), -skew);
  ids.assign(rows * topk, 0);
  weights.assign(rows * topk, 0.0f);
  std::uniform_real_distribution<float> u(0.1f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> left = p;
    float sum = 0.0f;
    for (int64_t j = 0; j < topk; ++j) {
      std::discrete_distribution<int> pick(left.begin(), left.end());
      const int e = pick(rng);
      left[e] = 0.0;
      ids[r * topk + j] = e;
      weights[r * topk + j] = u(rng);
      sum += weights[r * topk + j];
    }
    for (int64_t j = 0; j < topk; ++j) weights[r * topk + j] /= sum;
  }
}

// The path M3_MOE_GEMM=`forced` runs for `picks` picks (kernels/cuda/moe_experts.cu).
const char* Ran(const std::string& forced, int64_t picks, int64_t experts) {
  const bool gemv = picks <= kc::kMoeGemvMaxPicks, pick = picks <= experts;
  if (forced == "gemv") return gemv ? "gemv" : pick ? "pick" : "host";
  if (forced == "pick") return pick ? "pick" : "host";
  if (forced == "padded") return "padded";
  return forced == "grouped" ? "grouped" : "loop";
}

struct Case {
  const char* name;
  int64_t rows, experts, used, topk;
  double skew;
  int64_t remote_every = 0;  // every n-th pick is another rank's (id -1); 0: none
};

void RunCase(const Case& c, cublasHandle_t blas, cudaStream_t stream) {
  const int64_t H = 512, I = 256, E = c.experts, K = c.topk, rows = c.rows;
  const float alpha = 1.702f, limit = 7.0f, scale = 2.5f;
  const std::vector<float> x = RandomBf16(rows * H, 11, 1.0f);
  const std::vector<float> gate_up = RandomBf16(E * 2 * I * H, 12, 0.08f);
  const std::vector<float> down = RandomBf16(E * H * I, 13, 0.08f);
  const std::vector<float> out0 = RandomBf16(rows * H, 14, 0.5f);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  Route(rows, K, c.used, c.skew, 15, ids, weights);
  if (c.remote_every > 0)
    for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(c.remote_every)) ids[i] = -1;
  std::vector<int64_t> load(E, 0);
  for (int32_t e : ids)
    if (e >= 0) ++load[e];
  const int64_t empty = std::count(load.begin(), load.end(), 0);
  const int64_t most = *std::max_element(load.begin(), load.end());

  std::vector<float> want = out0;
  kernels::cpu::MoeExpertsDims cd{H, I, E, K, alpha, limit, scale};
  kernels::cpu::MoeGroupedExperts(x.data(), rows, ids.data(), weights.data(), gate_up.data(),
                                  down.data(), cd, want.data());

  const DeviceBf16 dx(x), dgu(gate_up), ddown(down);
  const DeviceArray<int32_t> dids(ids);
  const DeviceArray<float> dw(weights);
  kc::MoeExpertsDims gd;
  gd.experts = E;
  gd.inter = I;
  gd.hidden = H;
  gd.topk = K;
  gd.alpha = alpha;
  gd.limit = limit;
  gd.scale = scale;
  // The decode-sized paths with a lent workspace (as the CUDA backend lends its op scratch)
  // and without one (stream-ordered scratch); the host-synchronized paths allocate their own.
  const size_t ws_bytes = kc::MoeExpertsWorkspaceBytes(rows, gd);
  void* ws = nullptr;
  if (ws_bytes > 0) Ok(cudaMalloc(&ws, ws_bytes));
  for (const bool lend : {true, false})
    for (const char* path : {"gemv", "pick", "padded", "grouped", "loop"}) {
      if (!lend && ws_bytes == 0) continue;
      setenv("M3_MOE_GEMM", path, 1);
      const DeviceBf16 dout(out0);
      kc::MoeGroupedExperts(blas, dx.get(), rows, dids.p, dw.p, kc::ElemType::kF32, dgu.get(),
                            ddown.get(), gd, dout.get(), stream,
                            kc::MoeWorkspace{lend ? ws : nullptr, lend ? ws_bytes : 0});
      Ok(cudaStreamSynchronize(stream));
      const double e = RelativeL2(dout.Get(rows * H), want);
      std::printf(
          "  MoeGroupedExperts %-34s %-7s %-9s (%lld rows, %lld picks, %lld of %lld experts "
          "empty, largest group %lld): rel L2 %.3e\n",
          c.name, Ran(path, rows * K, E), lend ? "lent" : "own", static_cast<long long>(rows),
          static_cast<long long>(rows * K), static_cast<long long>(empty),
          static_cast<long long>(E), static_cast<long long>(most), e);
      CHECK(e < 1e-2);
    }
  if (ws) cudaFree(ws);
  unsetenv("M3_MOE_GEMM");
}

TEST_CASE("MoE grouped experts at prefill and decode sizes match the CPU twin") {
  cudaStream_t stream;
  Ok(cudaStreamCreate(&stream));
  cublasHandle_t blas;
  REQUIRE(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
  cublasSetStream(blas, stream);
  const Case cases[] = {
      {"prefill, 1024 rows, skewed load", 1024, 32, 28, 4, 1.2},
      {"prefill, 517 rows, even load", 517, 16, 16, 4, 0.0},
      {"7 rows, most experts empty", 7, 32, 9, 4, 0.5},
      {"128 rows, skewed load", 128, 32, 24, 4, 1.0},
      {"decode-sized, 5 rows", 5, 32, 32, 4, 0.0},
      {"every 3rd pick remote, 1024 rows", 1024, 32, 28, 4, 1.2, 3},
      {"every 2nd pick remote, 1 row", 1, 32, 32, 4, 0.0, 2},
      {"every pick remote, 6 rows", 6, 32, 32, 4, 0.0, 1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    RunCase(c, blas, stream);
  }
  std::printf("  grouped GEMM calls run as per-expert loops (cuBLAS refused them): %lld\n",
              static_cast<long long>(kc::MoeGroupedGemmFallbacks()));
  cublasDestroy(blas);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace m3::test
