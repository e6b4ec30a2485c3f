// QkNormRopeToPages: one warp per (row, head unit), a unit being a q head, a k head, a v head,
// an index q head or the index key. The normed head goes through shared memory so each lane can
// read the partner channel of its rotation. With the FP8 KV cache a k or v unit quantizes its
// head from registers: the warp's max |x|, then cvt.rn.satfinite.e4m3 of x / scale per lane.
#include "kernels/cuda/qk_norm_rope.cuh"

#include <cuda_fp8.h>

namespace m3::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxDim = 256;

struct Args {
  const bf16* qkv;
  QkNormRopeDims d;
  QkNormWeightsPtr w;
  const float* cos;
  const float* sin;
  const int64_t* slots;
  bf16* q_out;
  bf16* index_q_out;
  bf16* k_pages;
  bf16* v_pages;
  bf16* index_k_pages;
  int64_t width;
  int64_t units;
  Fp8KvOut kv;  // kFp8: K / V go here instead of k_pages / v_pages
};

// One K or V head (values[i]: channel lane + 32 i) as e4m3 codes of x / scale and its scale
// (max|x| / 448, 1 for an all-zero head), as kernels/cpu/kv_cache_fp8.h quantizes it.
__device__ __forceinline__ void QuantizeHead(const float (&values)[kMaxDim / 32], int64_t dim,
                                             uint8_t* codes, float* scale, int lane) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxDim / 32; ++i) amax = fmaxf(amax, fabsf(values[i]));
  amax = WarpMax(amax);
  const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
#pragma unroll
  for (int i = 0; i < kMaxDim / 32; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < dim)
      codes[c] =
          static_cast<uint8_t>(__nv_cvt_float_to_fp8(values[i] / s, __NV_SATFINITE, __NV_E4M3));
  }
  if (lane == 0) *scale = s;
}

// kFp8: k and v units quantize into a.kv.
template <bool kFp8>
__global__ void QkNormRopeKernel(Args a) {
  ChainedKernelStart();
  __shared__ float buf[kWarps][kMaxDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t unit = int64_t{blockIdx.y} * kWarps + warp;
  if (unit >= a.units) return;
  const int64_t r = blockIdx.x;
  const QkNormRopeDims& d = a.d;
  const int64_t D = d.head_dim, qw = d.q_heads * D, kw = d.kv_heads * D;
  const int64_t slot = a.slots[r];
  const bf16* row = a.qkv + r * a.width;
  // What this unit reads, its width, norm weight (null: copy), rotary width and destination.
  const bf16* src;
  int64_t dim = D, rot = d.rot;
  const float* w = nullptr;
  bf16* dst = nullptr;
  uint8_t* codes = nullptr;  // kFp8, k and v units: the head's codes and scale
  float* code_scale = nullptr;
  int64_t u = unit;
  if (u < d.q_heads) {
    src = row + u * D;
    w = a.w.q_norm;
    dst = a.q_out + r * qw + u * D;
  } else if ((u -= d.q_heads) < d.kv_heads) {
    src = row + qw + u * D;
    w = a.w.k_norm;
    if constexpr (kFp8) {
      codes = a.kv.k + slot * kw + u * D;
      code_scale = a.kv.k_scales + slot * d.kv_heads + u;
    } else {
      dst = a.k_pages + slot * kw + u * D;
    }
  } else if ((u -= d.kv_heads) < d.kv_heads) {
    src = row + qw + kw + u * D;
    if constexpr (kFp8) {
      codes = a.kv.v + slot * kw + u * D;
      code_scale = a.kv.v_scales + slot * d.kv_heads + u;
    } else {
      dst = a.v_pages + slot * kw + u * D;
    }
  } else if ((u -= d.kv_heads) < d.index_heads) {
    dim = d.index_dim;
    rot = d.index_rot;
    src = row + qw + 2 * kw + u * dim;
    w = a.w.index_q_norm;
    dst = a.index_q_out + (r * d.index_heads + u) * dim;
  } else {
    dim = d.index_dim;
    rot = d.index_rot;
    src = row + qw + 2 * kw + d.index_heads * dim;
    w = a.w.index_k_norm;
    dst = a.index_k_pages + (d.index_k_by_row ? r : slot) * dim;
  }
  constexpr int kPerLane = kMaxDim / 32;
  if (w == nullptr) {
    if constexpr (kFp8) {
      if (codes != nullptr) {
        float values[kPerLane];
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
          const int64_t c = lane + 32 * i;
          values[i] = c < dim ? __bfloat162float(src[c]) : 0.0f;
        }
        QuantizeHead(values, dim, codes, code_scale, lane);
        return;
      }
    }
    for (int64_t i = lane; i < dim; i += 32) dst[i] = src[i];
    return;
  }
  float ss = 0.0f;
  for (int64_t i = lane; i < dim; i += 32) {
    const float v = __bfloat162float(src[i]);
    ss += v * v;
  }
  const float inv = rsqrtf(WarpSum(ss) / static_cast<float>(dim) + d.eps);
  float* b = buf[warp];
  for (int64_t i = lane; i < dim; i += 32) b[i] = (__bfloat162float(src[i]) * inv) * (1.0f + w[i]);
  __syncwarp();
  const float* c = a.cos + r * d.rot;
  const float* s = a.sin + r * d.rot;
  const int64_t half = rot / 2;
  if constexpr (kFp8) {
    if (codes != nullptr) {
      float values[kPerLane];
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int64_t i = lane + 32 * j;
        float v = i < dim ? b[i] : 0.0f;
        if (i < half)
          v = b[i] * c[i] - b[i + half] * s[i];
        else if (i < rot)
          v = b[i] * c[i] + b[i - half] * s[i];
        values[j] = v;
      }
      QuantizeHead(values, dim, codes, code_scale, lane);
      return;
    }
  }
  for (int64_t i = lane; i < dim; i += 32) {
    float v = b[i];
    if (i < half)
      v = b[i] * c[i] - b[i + half] * s[i];
    else if (i < rot)
      v = b[i] * c[i] + b[i - half] * s[i];
    dst[i] = __float2bfloat16(v);
  }
}

__global__ void RopeTablesKernel(const int32_t* positions, int64_t rows, const float* inv_freq,
                                 int64_t half, float* cos_out, float* sin_out) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= rows * half) return;
  const int64_t r = i / half, f = i % half;
  // The host's arithmetic: an f32 product, then f64 trigonometry rounded to f32.
  const float angle = static_cast<float>(positions[r]) * inv_freq[f];
  const float c = static_cast<float>(cos(static_cast<double>(angle)));
  const float s = static_cast<float>(sin(static_cast<double>(angle)));
  float* cr = cos_out + r * 2 * half;
  float* sr = sin_out + r * 2 * half;
  cr[f] = cr[f + half] = c;
  sr[f] = sr[f + half] = s;
}

}  // namespace

void RopeTables(const int32_t* positions, int64_t rows, const float* inv_freq, int64_t half,
                float* cos, float* sin, cudaStream_t stream) {
  if (rows <= 0 || half <= 0) return;
  RopeTablesKernel<<<Blocks(rows * half, 256), 256, 0, stream>>>(positions, rows, inv_freq, half,
                                                                 cos, sin);
  CheckLaunch("RopeTables");
}

namespace {

void Launch(const Args& args, int64_t rows, cudaStream_t stream) {
  if (rows <= 0) return;
  const QkNormRopeDims& d = args.d;
  if (d.head_dim > kMaxDim || d.index_dim > kMaxDim)
    throw std::runtime_error("QkNormRopeToPages: head dims above 256 are not supported");
  Args a = args;
  a.width = (d.q_heads + 2 * d.kv_heads) * d.head_dim +
            (d.index_heads > 0 ? (d.index_heads + 1) * d.index_dim : 0);
  a.units = d.q_heads + 2 * d.kv_heads + (d.index_heads > 0 ? d.index_heads + 1 : 0);
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((a.units + kWarps - 1) / kWarps));
  if (a.kv.k != nullptr)
    LaunchAfterPrior(QkNormRopeKernel<true>, grid, kWarps * 32, 0, stream, a);
  else
    LaunchAfterPrior(QkNormRopeKernel<false>, grid, kWarps * 32, 0, stream, a);
  CheckLaunch("QkNormRopeToPages");
}

}  // namespace

void QkNormRopeToPages(const bf16* qkv, int64_t rows, const QkNormRopeDims& d,
                       const QkNormWeightsPtr& w, const float* cos, const float* sin,
                       const int64_t* slots, bf16* q_out, bf16* index_q_out, bf16* k_pages,
                       bf16* v_pages, bf16* index_k_pages, cudaStream_t stream) {
  Launch(
      {qkv, d, w, cos, sin, slots, q_out, index_q_out, k_pages, v_pages, index_k_pages, 0, 0, {}},
      rows, stream);
}

void QkNormRopeToPages(const bf16* qkv, int64_t rows, const QkNormRopeDims& d,
                       const QkNormWeightsPtr& w, const float* cos, const float* sin,
                       const int64_t* slots, bf16* q_out, bf16* index_q_out, const Fp8KvOut& kv,
                       bf16* index_k_pages, cudaStream_t stream) {
  if (kv.k == nullptr || kv.v == nullptr || kv.k_scales == nullptr || kv.v_scales == nullptr)
    throw std::runtime_error("QkNormRopeToPages: an FP8 KV cache needs codes and scales");
  Launch(
      {qkv, d, w, cos, sin, slots, q_out, index_q_out, nullptr, nullptr, index_k_pages, 0, 0, kv},
      rows, stream);
}

}  // namespace m3::kernels::cuda
