// MoeRouteSigmoid: one thread per token, k selection passes over the experts (k and the expert
// count are small; the router GEMM dominates).
#include "kernels/cuda/moe_routing.cuh"

namespace m3::kernels::cuda {
namespace {

__device__ __forceinline__ float Sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

__global__ void RouteKernel(const void* logits, ElemType lt, int64_t tokens, int64_t experts,
                            const float* bias, int64_t topk, int32_t* ids, void* weights,
                            ElemType wt) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= tokens) return;
  int32_t* id = ids + t * topk;
  float sum = 0.0f;
  for (int64_t j = 0; j < topk; ++j) {
    float best = -INFINITY, best_s = 0.0f;
    int32_t best_e = -1;
    for (int64_t e = 0; e < experts; ++e) {
      bool taken = false;
      for (int64_t p = 0; p < j; ++p) taken |= id[p] == e;
      if (taken) continue;
      const float s = Sigmoid(LoadAny(logits, lt, t * experts + e));
      const float c = s + (bias ? bias[e] : 0.0f);
      if (best_e < 0 || c > best) {
        best = c;
        best_s = s;
        best_e = static_cast<int32_t>(e);
      }
    }
    id[j] = best_e;
    StoreAny(weights, wt, t * topk + j, best_s);  // normalized below
    sum += best_s;
  }
  for (int64_t j = 0; j < topk; ++j)
    StoreAny(weights, wt, t * topk + j, Sigmoid(LoadAny(logits, lt, t * experts + id[j])) / sum);
}

}  // namespace

void MoeRouteSigmoid(const void* logits, ElemType logits_t, int64_t tokens, int64_t experts,
                     const float* bias, int64_t topk, int32_t* ids, void* weights,
                     ElemType weights_t, cudaStream_t stream) {
  if (tokens <= 0) return;
  RouteKernel<<<Blocks(tokens, 128), 128, 0, stream>>>(logits, logits_t, tokens, experts, bias,
                                                       topk, ids, weights, weights_t);
  CheckLaunch("MoeRouteSigmoid");
}

}  // namespace m3::kernels::cuda
