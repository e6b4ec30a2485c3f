// SwigluOai: a grid-stride loop over out's elements.
#include "kernels/cuda/swiglu.cuh"

namespace m3::kernels::cuda {
namespace {

__global__ void SwigluKernel(const bf16* gu, int64_t rows, int64_t inter, float alpha, float limit,
                             bf16* out) {
  ChainedKernelStart();
  const int64_t n = rows * inter;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / inter, c = i % inter;
    const float g = fminf(__bfloat162float(gu[r * 2 * inter + c]), limit);
    const float u = fminf(fmaxf(__bfloat162float(gu[r * 2 * inter + inter + c]), -limit), limit);
    const float sig = 1.0f / (1.0f + expf(-alpha * g));
    out[i] = __float2bfloat16((u + 1.0f) * (g * sig));
  }
}

}  // namespace

void SwigluOai(const bf16* gate_up, int64_t rows, int64_t inter, float alpha, float limit,
               bf16* out, cudaStream_t stream) {
  if (rows * inter <= 0) return;
  const int64_t blocks = (rows * inter + 255) / 256;
  LaunchAfterPrior(SwigluKernel, static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0,
                   stream, gate_up, rows, inter, alpha, limit, out);
  CheckLaunch("SwigluOai");
}

}  // namespace m3::kernels::cuda
