// AddRmsNormGemma: each thread owns the same columns in both passes, so the second pass reads
// back its own stores of the residual.
#include "kernels/cuda/rms_norm.cuh"

namespace m3::kernels::cuda {
namespace {

__global__ void AddRmsNormKernel(bf16* residual, const bf16* delta, int64_t dim, const float* w,
                                 float eps, bf16* out) {
  __shared__ float scratch[32];
  bf16* x = residual + blockIdx.x * dim;
  const bf16* d = delta ? delta + blockIdx.x * dim : nullptr;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = __bfloat162float(x[i]);
    if (d) {
      const bf16 r = __float2bfloat16(v + __bfloat162float(d[i]));
      x[i] = r;
      v = __bfloat162float(r);
    }
    ss += v * v;
  }
  ss = BlockSum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(dim) + eps);
  bf16* o = out + blockIdx.x * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    o[i] = __float2bfloat16((__bfloat162float(x[i]) * inv) * (1.0f + w[i]));
}

}  // namespace

void AddRmsNormGemma(bf16* residual, const bf16* delta, int64_t rows, int64_t dim, const float* w,
                     float eps, bf16* out, cudaStream_t stream) {
  if (rows <= 0) return;
  AddRmsNormKernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(residual, delta, dim, w, eps,
                                                                    out);
  CheckLaunch("AddRmsNormGemma");
}

}  // namespace m3::kernels::cuda
