// Shared device helpers of the CUDA kernels: bf16 <-> f32 loads and stores, warp and block
// reductions, the float element types the kernels accept, and the launch-error check. Every
// kernel stores bf16 (or f32 where stated) and computes in f32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

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
