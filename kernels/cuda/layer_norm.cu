// LayerNorm: one block per row; every read of the row happens before the last reduction's
// barrier, so writing in place is safe.
#include "kernels/cuda/layer_norm.cuh"

namespace m3::kernels::cuda {
namespace {

__global__ void LayerNormKernel(const bf16* x, int64_t dim, const float* w, const float* b,
                                float eps, bf16* y) {
  __shared__ float scratch[32];
  const bf16* xr = x + blockIdx.x * dim;
  bf16* yr = y + blockIdx.x * dim;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) s += __bfloat162float(xr[i]);
  const float mean = BlockSum(s, scratch) / static_cast<float>(dim);
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float c = __bfloat162float(xr[i]) - mean;
    v += c * c;
  }
  const float inv = rsqrtf(BlockSum(v, scratch) / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    yr[i] = __float2bfloat16((__bfloat162float(xr[i]) - mean) * inv * w[i] + b[i]);
}

}  // namespace

void LayerNorm(const bf16* x, int64_t rows, int64_t dim, const float* w, const float* b, float eps,
               bf16* y, cudaStream_t stream) {
  if (rows <= 0) return;
  LayerNormKernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(x, dim, w, b, eps, y);
  CheckLaunch("LayerNorm");
}

}  // namespace m3::kernels::cuda
