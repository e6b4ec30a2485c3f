// Shared device helpers of the CUDA kernels: bf16 <-> f32 loads and stores, warp and block
// reductions, the float element types the kernels accept, and the launch-error check. Every
// kernel stores bf16 (or f32 where stated) and computes in f32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace m3::kernels::cuda {

using bf16 = __nv_bfloat16;

// The float element types a kernel may read (weights in checkpoints) or write.
enum class ElemType : int { kF32 = 0, kF16 = 1, kBF16 = 2, kF64 = 3 };

// Throws when the last launch (or an earlier asynchronous error) failed, naming the kernel.
inline void CheckLaunch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA kernel ") + what + ": " + cudaGetErrorString(e));
}

// Opts Kernel in to `bytes` of dynamic shared memory on the current device. The attribute is
// per device: a process driving several GPUs (one rank thread per GPU) must set it on each, so
// the bytes already allowed are remembered per device, not once per process.
template <auto Kernel>
void AllowDynamicShared(size_t bytes) {
  constexpr int kDevices = 64;
  static std::atomic<int> allowed[kDevices] = {};
  int dev = 0;
  cudaGetDevice(&dev);
  const int want = static_cast<int>(bytes);
  if (dev >= 0 && dev < kDevices && allowed[dev].load(std::memory_order_relaxed) >= want) return;
  if (cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, want) !=
      cudaSuccess) {
    const cudaError_t e = cudaGetLastError();
    throw std::runtime_error(std::string("CUDA shared memory opt-in of ") + std::to_string(bytes) +
                             " bytes: " + cudaGetErrorString(e));
  }
  if (dev >= 0 && dev < kDevices) {
    int seen = allowed[dev].load(std::memory_order_relaxed);
    while (seen < want && !allowed[dev].compare_exchange_weak(seen, want)) {
    }
  }
}

// The current device's SM count, looked up once per device (launch plans are made per call).
inline int SmCount() {
  constexpr int kDevices = 64;
  static std::atomic<int> cached[kDevices] = {};
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 132;
  if (dev >= 0 && dev < kDevices && (n = cached[dev].load(std::memory_order_relaxed)) > 0) return n;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
    return 132;
  if (dev >= 0 && dev < kDevices) cached[dev].store(n, std::memory_order_relaxed);
  return n;
}

// Programmatic dependent launch (Hopper): a decode step is a chain of a few dozen small kernels,
// and each launch waits for the previous kernel to finish before its blocks are even scheduled.
// A kernel launched by LaunchAfterPrior may start while the previous one runs: it must call
// ChainedKernelStart() before it touches global memory, which waits until the previous kernel
// has completed with its writes visible (and so, transitively, everything before it), then lets
// the next chained kernel launch: that one's launch and block scheduling overlap this kernel's
// run. (A kernel's dependents launch only once all of its blocks have started, so they never
// take the slots of blocks it has yet to run.) Kernels launched with <<<>>> are serialized as
// usual, and ChainedKernelStart() is then only the wait. Since every chained kernel waits before
// it lets its dependents launch, what was written before the previous kernel started is
// complete when a chained kernel starts: it may read that before its own wait.
#ifdef __CUDACC__
__device__ __forceinline__ void ChainedKernelStart() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// The cudaLaunchKernelEx configuration of a chained launch (LaunchAfterPrior) in thread-block
// clusters of `cluster` (1 x 1 x 1: no clusters); also what occupancy queries of such a launch
// take (cudaOccupancyMaxActiveClusters). config points into attr: not copyable.
struct ChainedLaunch {
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t config{};
  ChainedLaunch(dim3 grid, dim3 cluster, dim3 block, size_t smem, cudaStream_t stream) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = cluster.x;
    attr[1].val.clusterDim.y = cluster.y;
    attr[1].val.clusterDim.z = cluster.z;
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attr;
    config.numAttrs = cluster.x * cluster.y * cluster.z > 1 ? 2 : 1;
  }
  ChainedLaunch(const ChainedLaunch&) = delete;
  ChainedLaunch& operator=(const ChainedLaunch&) = delete;
};

// As LaunchAfterPrior, in thread-block clusters of `cluster` (the grid a multiple of it; 1 x 1 x 1:
// no clusters). Cluster sizes above 8 need the kernel's non-portable-size opt-in.
template <typename... Params, typename... Args>
void LaunchClustersAfterPrior(void (*kernel)(Params...), dim3 grid, dim3 cluster, dim3 block,
                              size_t smem, cudaStream_t stream, Args&&... args) {
  const ChainedLaunch launch(grid, cluster, block, smem, stream);
  cudaLaunchKernelEx(&launch.config, kernel, static_cast<Params>(std::forward<Args>(args))...);
}

template <typename... Params, typename... Args>
void LaunchAfterPrior(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                      cudaStream_t stream, Args&&... args) {
  LaunchClustersAfterPrior(kernel, grid, dim3(1, 1, 1), block, smem, stream,
                           std::forward<Args>(args)...);
}
#endif

// Whether p may be read and written as 16-byte vectors (null counts as aligned).
inline bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

inline unsigned Blocks(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

#ifdef __CUDACC__
__device__ __forceinline__ float Load(const bf16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ float Load(const float* p, int64_t i) {
  return p[i];
}
__device__ __forceinline__ void Store(bf16* p, int64_t i, float v) {
  p[i] = __float2bfloat16(v);
}
__device__ __forceinline__ void Store(float* p, int64_t i, float v) {
  p[i] = v;
}

// Element i of a float array of run-time type t.
__device__ __forceinline__ float LoadAny(const void* p, ElemType t, int64_t i) {
  switch (t) {
    case ElemType::kF32:
      return static_cast<const float*>(p)[i];
    case ElemType::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case ElemType::kBF16:
      return __bfloat162float(static_cast<const bf16*>(p)[i]);
    default:
      return static_cast<float>(static_cast<const double*>(p)[i]);
  }
}
__device__ __forceinline__ void StoreAny(void* p, ElemType t, int64_t i, float v) {
  if (t == ElemType::kF32)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<bf16*>(p)[i] = __float2bfloat16(v);
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 floats; the call ends with a barrier so scratch may be reused.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = WarpSum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < warps ? scratch[lane] : 0.0f;
  t = WarpSum(t);
  __syncthreads();
  return t;
}
#endif

}  // namespace m3::kernels::cuda
