// MoeRouteSigmoid: one warp per token (up to kWarpExperts experts: each lane holds its experts'
// sigmoid scores in registers, each of the k selections a warp argmax), else one thread per
// token. Both select and normalize in the same order with the same arithmetic, so the result
// does not depend on the path.
#include "kernels/cuda/moe_routing.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kPerLane = 8;
constexpr int64_t kWarpExperts = 32 * kPerLane;
constexpr int kMaxWarpTopk = 32;

__device__ __forceinline__ float Sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

__device__ __forceinline__ int32_t Local(int32_t e, int64_t first, int64_t count) {
  if (count < 0) return e;
  return e >= first && e < first + count ? static_cast<int32_t>(e - first) : -1;
}

// Whether candidate (c, e) beats (best, best_e): higher score, ties to the lower expert.
__device__ __forceinline__ bool Beats(float c, int e, float best, int best_e) {
  return best_e < 0 || (e >= 0 && (c > best || (c == best && e < best_e)));
}

__global__ void RouteWarpKernel(const void* logits, ElemType lt, int64_t tokens, int64_t experts,
                                const float* bias, int64_t topk, int32_t* ids, void* weights,
                                ElemType wt, int64_t local_first, int64_t local_count) {
  ChainedKernelStart();
  const int64_t t = blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (t >= tokens) return;
  float s[kPerLane], c[kPerLane];
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t e = lane + 32 * i;
    s[i] = e < experts ? Sigmoid(LoadAny(logits, lt, t * experts + e)) : 0.0f;
    c[i] = e < experts ? s[i] + (bias ? bias[e] : 0.0f) : 0.0f;
  }
  unsigned taken = 0;  // bit i: this lane's expert lane + 32 i is chosen
  float chosen_s[kMaxWarpTopk];
  float sum = 0.0f;
  for (int64_t j = 0; j < topk; ++j) {
    float best = 0.0f, best_s = 0.0f;
    int best_e = -1;
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < experts && !(taken >> i & 1u) && Beats(c[i], e, best, best_e)) {
        best = c[i];
        best_s = s[i];
        best_e = e;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const float os = __shfl_xor_sync(0xffffffffu, best_s, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (Beats(ob, oe, best, best_e)) {
        best = ob;
        best_s = os;
        best_e = oe;
      }
    }
    if (best_e >= 0 && (best_e & 31) == lane) taken |= 1u << (best_e / 32);
    chosen_s[j] = best_s;
    sum += best_s;
    if (lane == 0) ids[t * topk + j] = Local(best_e, local_first, local_count);
  }
  if (lane == 0)
    for (int64_t j = 0; j < topk; ++j) StoreAny(weights, wt, t * topk + j, chosen_s[j] / sum);
}

__global__ void RouteKernel(const void* logits, ElemType lt, int64_t tokens, int64_t experts,
                            const float* bias, int64_t topk, int32_t* ids, void* weights,
                            ElemType wt, int64_t local_first, int64_t local_count) {
  ChainedKernelStart();
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
  for (int64_t j = 0; j < topk; ++j) id[j] = Local(id[j], local_first, local_count);
}

}  // namespace

void MoeRouteSigmoid(const void* logits, ElemType logits_t, int64_t tokens, int64_t experts,
                     const float* bias, int64_t topk, int32_t* ids, void* weights,
                     ElemType weights_t, cudaStream_t stream, int64_t local_first,
                     int64_t local_count) {
  if (tokens <= 0) return;
  if (experts <= kWarpExperts && topk <= kMaxWarpTopk && topk <= experts) {
    constexpr int kWarps = 4;
    LaunchAfterPrior(RouteWarpKernel, Blocks(tokens, kWarps), 32 * kWarps, 0, stream, logits,
                     logits_t, tokens, experts, bias, topk, ids, weights, weights_t, local_first,
                     local_count);
  } else {
    LaunchAfterPrior(RouteKernel, Blocks(tokens, 128), 128, 0, stream, logits, logits_t, tokens,
                     experts, bias, topk, ids, weights, weights_t, local_first, local_count);
  }
  CheckLaunch("MoeRouteSigmoid");
}

}  // namespace m3::kernels::cuda
