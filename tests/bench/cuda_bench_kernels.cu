// Random fills and the streaming read of cuda_bench_kernels.cuh: a splitmix64 hash per
// element (any grid gives the same contents), and a grid-stride 16-byte load loop.
#include <cuda_bf16.h>

#include <stdexcept>
#include <string>

#include "tests/bench/cuda_bench_kernels.cuh"

namespace m3::bench {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kReadBlocks = 132 * 8;  // several blocks per H100 SM

__device__ __forceinline__ float Uniform(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

template <typename T>
__global__ void FillKernel(T* p, size_t n, uint64_t seed, float scale, float offset) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float v = offset + scale * Uniform(seed, i);
    if constexpr (sizeof(T) == 2)
      p[i] = __float2bfloat16(v);
    else
      p[i] = v;
  }
}

__global__ void ReadKernel(const uint4* p, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcs(p + i);  // streaming: the data is read once
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicXor(sink + blockIdx.x, acc);
}

void Check(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

unsigned FillBlocks(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65536 ? b : 65536);
}

}  // namespace

void FillUniformBf16(void* p, size_t n, uint64_t seed, float scale, float offset,
                     cudaStream_t stream) {
  if (n == 0) return;
  FillKernel<<<FillBlocks(n), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(p), n, seed, scale,
                                                     offset);
  Check("FillUniformBf16");
}

void FillUniformF32(float* p, size_t n, uint64_t seed, float scale, float offset,
                    cudaStream_t stream) {
  if (n == 0) return;
  FillKernel<<<FillBlocks(n), kThreads, 0, stream>>>(p, n, seed, scale, offset);
  Check("FillUniformF32");
}

void StreamRead(const void* p, size_t bytes, uint32_t* sink, cudaStream_t stream) {
  ReadKernel<<<kReadBlocks, 512, 0, stream>>>(static_cast<const uint4*>(p), bytes / 16, sink);
  Check("StreamRead");
}

size_t ReadSinkWords() {
  return kReadBlocks;
}

}  // namespace m3::bench
