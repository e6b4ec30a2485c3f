// AddRmsNormGemma: a block per row; rows of up to 8192 values held in registers as 16-byte
// vectors, others in a two-pass loop in which each thread reads back its own stores of the
// residual.
#include "kernels/cuda/rms_norm.cuh"

#include "kernels/cuda/bf16x8.cuh"

namespace m3::kernels::cuda {
namespace {

// Rows of up to kThreads * 8 * kMaxVec values are held in registers, 8 per 16-byte vector: every
// load of a row is issued before the first is used (a loop that stores the residual between
// its loads waits a full memory latency per pass: 11 us for one 6144-wide row on the H100).
constexpr int kThreads = 256;
constexpr int kMaxVec = 4;

__device__ __forceinline__ uint4 ToBf16x8(const float f[8]) {
  uint4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

__global__ void __launch_bounds__(kThreads)
    AddRmsNormVecKernel(bf16* residual, const bf16* delta, int64_t dim, const float* w, float eps,
                        bf16* out) {
  ChainedKernelStart();
  __shared__ float scratch[32];
  const int64_t n8 = dim / 8;
  uint4* x = reinterpret_cast<uint4*>(residual + blockIdx.x * dim);
  const uint4* d = delta ? reinterpret_cast<const uint4*>(delta + blockIdx.x * dim) : nullptr;
  uint4 xv[kMaxVec], dv[kMaxVec];
#pragma unroll
  for (int j = 0; j < kMaxVec; ++j) {
    const int64_t i = threadIdx.x + int64_t{j} * kThreads;
    xv[j] = i < n8 ? x[i] : make_uint4(0, 0, 0, 0);
    dv[j] = d != nullptr && i < n8 ? d[i] : make_uint4(0, 0, 0, 0);
  }
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxVec; ++j) {
    const int64_t i = threadIdx.x + int64_t{j} * kThreads;
    if (i >= n8) break;
    float f[8];
    Unpack8(xv[j], f);
    if (d != nullptr) {
      float g[8];
      Unpack8(dv[j], g);
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] += g[e];
      xv[j] = ToBf16x8(f);  // the stored residual, rounded as the bf16 model keeps it
      x[i] = xv[j];
      Unpack8(xv[j], f);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) ss += f[e] * f[e];
  }
  ss = BlockSum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(dim) + eps);
  uint4* o = reinterpret_cast<uint4*>(out + blockIdx.x * dim);
  const float4* w4 = reinterpret_cast<const float4*>(w);
#pragma unroll
  for (int j = 0; j < kMaxVec; ++j) {
    const int64_t i = threadIdx.x + int64_t{j} * kThreads;
    if (i >= n8) break;
    const float4 wa = w4[2 * i], wb = w4[2 * i + 1];
    const float wf[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
    float f[8];
    Unpack8(xv[j], f);
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = (f[e] * inv) * (1.0f + wf[e]);
    o[i] = ToBf16x8(f);
  }
}

// Any width and alignment.
__global__ void AddRmsNormKernel(bf16* residual, const bf16* delta, int64_t dim, const float* w,
                                 float eps, bf16* out) {
  ChainedKernelStart();
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
  // out may be the residual itself: both kernels read a row before writing it.
  const bool vec = dim % 8 == 0 && dim <= int64_t{kThreads} * 8 * kMaxVec && Aligned16(residual) &&
                   Aligned16(delta) && Aligned16(w) && Aligned16(out);
  if (vec)
    LaunchAfterPrior(AddRmsNormVecKernel, static_cast<unsigned>(rows), kThreads, 0, stream,
                     residual, delta, dim, w, eps, out);
  else
    LaunchAfterPrior(AddRmsNormKernel, static_cast<unsigned>(rows), 256, 0, stream, residual, delta,
                     dim, w, eps, out);
  CheckLaunch("AddRmsNormGemma");
}

}  // namespace m3::kernels::cuda
