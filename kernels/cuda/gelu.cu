// GeluErf: a grid-stride loop.
#include "kernels/cuda/gelu.cuh"

namespace m3::kernels::cuda {
namespace {

__global__ void GeluKernel(bf16* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = __bfloat162float(x[i]);
    x[i] = __float2bfloat16(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
  }
}

}  // namespace

void GeluErf(bf16* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t blocks = (n + 255) / 256;
  GeluKernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(x, n);
  CheckLaunch("GeluErf");
}

}  // namespace m3::kernels::cuda
