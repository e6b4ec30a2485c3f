// m3-probe-gemv-pattern: a probe of the decode GEMVs' read pattern (y = W x for one input row, W
// bf16 [n][k] streamed once): how fast HBM delivers W when each warp streams its own row
// (kernels/cuda/matmul.cu's GemvKernel: eight rows a block, about 8000 rows in flight over the
// GPU), when a block's eight warps stream the block's eight rows one after another as one
// contiguous region (512-byte pieces interleaved over the warps), and a plain streaming read of the
// same bytes; then the first way chained by programmatic dependent launch, 16 in a graph, with and
// without each warp's first weight loads issued before the wait on the previous kernel
// (docs/perf-log, "The decode GEMVs' loads"). Weight matrices rotate through 400 MB so that no run
// finds W in L2. Prints the median time and the bytes per second of each way, for the real model's
// o_proj shape (6144 x 8192) and its q projection's (8192 x 6144).
// Run on the GPU machine, no arguments (a CMake target of CUDA builds).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;

__device__ __forceinline__ float Dot8(const uint4& w, const uint4& x) {
  const __nv_bfloat162* a = reinterpret_cast<const __nv_bfloat162*>(&w);
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&x);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(a[i]), q = __bfloat1622float2(b[i]);
    s = fmaf(p.x, q.x, s);
    s = fmaf(p.y, q.y, s);
  }
  return s;
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int K>
__device__ void StageX(const __nv_bfloat16* x, uint4* xs) {
  for (int i = threadIdx.x; i < K / 8; i += kThreads) xs[i] = reinterpret_cast<const uint4*>(x)[i];
  __syncthreads();
}

// The block's eight rows as one region: piece m of warp w is the 512-byte piece 8m + w of it,
// in row m / (P / 8) (P pieces a row, a multiple of 8), so the warps read neighbouring pieces
// and the block moves through its rows in address order.
template <int K>
__global__ void __launch_bounds__(kThreads)
    BlockRows(const __nv_bfloat16* w, const __nv_bfloat16* x, float* y) {
  __shared__ uint4 xs[K / 8];
  __shared__ float part[kWarps][kWarps];
  StageX<K>(x, xs);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  constexpr int P = K / 8 / 32, PW = P / 8;  // pieces a row, a warp's pieces a row
  static_assert(P % 8 == 0, "rows of whole warp rounds");
  const uint4* base = reinterpret_cast<const uint4*>(w + int64_t{blockIdx.x} * kWarps * K);
  float acc[kWarps] = {};
  constexpr int kBatch = 8;
#pragma unroll
  for (int m0 = 0; m0 < kWarps * PW; m0 += kBatch) {
    uint4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) v[u] = __ldg(base + (8 * (m0 + u) + warp) * 32 + lane);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int m = m0 + u, r = m / PW, piece = 8 * m + warp - r * P;
      acc[r] += Dot8(v[u], xs[piece * 32 + lane]);
    }
  }
#pragma unroll
  for (int r = 0; r < kWarps; ++r) {
    const float s = WarpSum(acc[r]);
    if (lane == 0) part[warp][r] = s;
  }
  __syncthreads();
  if (threadIdx.x < kWarps) {
    float t = 0.0f;
    for (int i = 0; i < kWarps; ++i) t += part[i][threadIdx.x];
    y[int64_t{blockIdx.x} * kWarps + threadIdx.x] = t;
  }
}

// A warp a row, four 16-byte loads a lane in flight (as DotRows). kChained: launched by
// programmatic dependent launch, as the engine's kernels are, it waits for the previous kernel
// before staging x (which that kernel may have written). kEarly: the first four loads of the
// warp's weight row (written before any step) go out before that wait, so they overlap the
// previous kernel's last blocks.
template <int K, bool kChained = false, bool kEarly = false>
__global__ void __launch_bounds__(kThreads)
    WarpPerRow(const __nv_bfloat16* w, const __nv_bfloat16* x, float* y) {
  __shared__ uint4 xs[K / 8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t row = int64_t{blockIdx.x} * kWarps + warp;
  const uint4* wr = reinterpret_cast<const uint4*>(w + row * K);
  constexpr int k8 = K / 8, kUnroll = 4;
  uint4 first[kUnroll];
  if constexpr (kEarly) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) first[u] = __ldg(wr + lane + 32 * u);
  }
  if constexpr (kChained)
    asm volatile("griddepcontrol.wait;\ngriddepcontrol.launch_dependents;" ::: "memory");
  StageX<K>(x, xs);
  float acc = 0.0f;
  for (int c0 = lane; c0 < k8; c0 += 32 * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      v[u] = kEarly && c0 == lane ? first[u] : __ldg(wr + c0 + 32 * u);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += Dot8(v[u], xs[c0 + 32 * u]);
  }
  acc = WarpSum(acc);
  if (lane == 0) y[row] = acc;
}

__global__ void Stream(const uint4* p, int64_t n, float* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    acc ^= __ldg(p + i).x;
  if (acc == 0x12345u) *sink = 1.0f;
}

bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

template <int K>
void Shape(int n, const __nv_bfloat16* pool, size_t pool_bytes, const __nv_bfloat16* x, float* y,
           int sms) {
  const size_t bytes = size_t{static_cast<size_t>(n)} * K * 2;
  const int sets = static_cast<int>(pool_bytes / bytes);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const char* names[3] = {"warp a row (GemvKernel's way)", "block's rows as one region",
                          "streaming read"};
  for (int way = 0; way < 3; ++way) {
    std::vector<double> us;
    for (int run = 0; run < 22; ++run) {
      const __nv_bfloat16* w = pool + (run % sets) * (bytes / 2);
      cudaEventRecord(a);
      if (way == 0)
        WarpPerRow<K><<<n / kWarps, kThreads>>>(w, x, y);
      else if (way == 1)
        BlockRows<K><<<n / kWarps, kThreads>>>(w, x, y);
      else
        Stream<<<4 * sms, 512>>>(reinterpret_cast<const uint4*>(w),
                                 static_cast<int64_t>(bytes / 16), y);
      cudaEventRecord(b);
      if (!Ok(cudaEventSynchronize(b), "run")) return;
      float ms = 0.0f;
      cudaEventElapsedTime(&ms, a, b);
      if (run > 0) us.push_back(ms * 1000.0);
    }
    std::sort(us.begin(), us.end());
    const double med = us[us.size() / 2];
    std::printf("  %-32s %7.2f us  %6.0f GB/s\n", names[way], med, bytes / med * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

// A chain of 16 such GEMVs in one graph (each its own 100 MB matrix of the pool, so none is in
// L2), per GEMV.
template <int K, bool kEarly>
double ChainUs(int n, const __nv_bfloat16* pool, size_t pool_bytes, const __nv_bfloat16* x,
               float* y) {
  const size_t bytes = size_t{static_cast<size_t>(n)} * K * 2;
  const int sets = static_cast<int>(pool_bytes / bytes);
  constexpr int kChain = 16;
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  for (int i = 0; i < kChain; ++i) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(n / kWarps);
    config.blockDim = dim3(kThreads);
    config.stream = s;
    config.attrs = &attr;
    config.numAttrs = 1;
    cudaLaunchKernelEx(&config, WarpPerRow<K, true, kEarly>, pool + (i % sets) * (bytes / 2), x, y);
  }
  if (!Ok(cudaStreamEndCapture(s, &graph), "capture") ||
      !Ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate"))
    return -1.0;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> us;
  for (int run = 0; run < 10; ++run) {
    cudaEventRecord(a, s);
    cudaGraphLaunch(exec, s);
    cudaEventRecord(b, s);
    if (!Ok(cudaEventSynchronize(b), "chain")) return -1.0;
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, a, b);
    if (run > 0) us.push_back(ms * 1000.0 / kChain);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

template <int K>
void Chains(int n, const __nv_bfloat16* pool, size_t pool_bytes, const __nv_bfloat16* x, float* y) {
  const double bytes = static_cast<double>(n) * K * 2;
  for (int round = 0; round < 3; ++round) {
    const double late = ChainUs<K, false>(n, pool, pool_bytes, x, y);
    const double early = ChainUs<K, true>(n, pool, pool_bytes, x, y);
    std::printf(
        "  chained, 16 in a graph: weights after the wait %6.2f us (%4.0f GB/s), first "
        "loads before it %6.2f us (%4.0f GB/s)\n",
        late, bytes / late * 1e-3, early, bytes / early * 1e-3);
  }
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  constexpr size_t kPool = size_t{400} << 20;
  __nv_bfloat16 *pool = nullptr, *x = nullptr;
  float* y = nullptr;
  if (!Ok(cudaMalloc(&pool, kPool), "pool") || !Ok(cudaMalloc(&x, 8192 * 2), "x") ||
      !Ok(cudaMalloc(&y, 16384 * 4), "y"))
    return 1;
  cudaMemset(pool, 0, kPool);
  cudaMemset(x, 0, 8192 * 2);
  std::printf("o_proj shape: n 6144, k 8192 (100.7 MB)\n");
  Shape<8192>(6144, pool, kPool, x, y, sms);
  Chains<8192>(6144, pool, kPool, x, y);
  std::printf("q projection shape: n 8192, k 6144 (100.7 MB)\n");
  Shape<6144>(8192, pool, kPool, x, y, sms);
  Chains<6144>(8192, pool, kPool, x, y);
  return Ok(cudaDeviceSynchronize(), "probe") ? 0 : 1;
}
