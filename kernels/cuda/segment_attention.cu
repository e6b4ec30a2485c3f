// SegmentAttention: a rotary pass (one thread per rotated pair), then one warp per (row, head)
// with an online softmax over the segment's keys, lanes holding channels lane + 32 i.
#include "kernels/cuda/segment_attention.cuh"

#include <cmath>

namespace m3::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;

__global__ void RotaryKernel(bf16* qkv, int64_t rows, int64_t heads, int64_t hd, const float* cos,
                             const float* sin, int64_t rot) {
  const int64_t half = rot / 2, n = rows * 2 * heads * half;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const int64_t r = i / (2 * heads * half), rest = i % (2 * heads * half);
  const int64_t unit = rest / half, c = rest % half;  // unit: q heads, then k heads
  bf16* v = qkv + r * 3 * heads * hd + unit * hd;
  const float* cs = cos + r * rot;
  const float* sn = sin + r * rot;
  const float a = __bfloat162float(v[c]), b = __bfloat162float(v[c + half]);
  v[c] = __float2bfloat16(a * cs[c] - b * sn[c]);
  v[c + half] = __float2bfloat16(b * cs[c + half] + a * sn[c + half]);
}

__global__ void SegmentAttentionKernel(const bf16* qkv, int64_t rows, int64_t heads, int64_t D,
                                       const int32_t* segments, int64_t num_segments, float scale,
                                       bf16* out) {
  const int lane = threadIdx.x & 31;
  const int64_t idx = int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5);
  if (idx >= rows * heads) return;
  const int64_t r = idx / heads, h = idx % heads, width = heads * D, stride = 3 * width;
  int64_t seg = 0;
  while (seg + 1 < num_segments && segments[seg + 1] <= r) ++seg;
  float q[kMaxPerLane], acc[kMaxPerLane];
  const bf16* qr = qkv + r * stride + h * D;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    q[i] = c < D ? __bfloat162float(qr[c]) : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = segments[seg]; j < segments[seg + 1]; ++j) {
    const bf16* k = qkv + j * stride + width + h * D;
    const bf16* v = k + width;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < D) dot += q[i] * __bfloat162float(k[c]);
    }
    const float s = WarpSum(dot) * scale;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new), p = expf(s - m_new);
    l = l * corr + p;
    m = m_new;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < D) acc[i] = acc[i] * corr + p * __bfloat162float(v[c]);
    }
  }
  bf16* o = out + r * width + h * D;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < D) o[c] = __float2bfloat16(acc[i] * inv);
  }
}

}  // namespace

void SegmentAttention(bf16* qkv, int64_t rows, int64_t heads, int64_t head_dim, const float* cos,
                      const float* sin, int64_t rot, const int32_t* segments, int64_t num_segments,
                      bf16* out, cudaStream_t stream) {
  if (rows <= 0) return;
  if (head_dim > 32 * kMaxPerLane)
    throw std::runtime_error("SegmentAttention: head_dim above 256 is not supported");
  const int64_t pairs = rows * 2 * heads * (rot / 2);
  if (pairs > 0) {
    RotaryKernel<<<Blocks(pairs, 256), 256, 0, stream>>>(qkv, rows, heads, head_dim, cos, sin, rot);
    CheckLaunch("SegmentAttention rotary");
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  SegmentAttentionKernel<<<Blocks(rows * heads, kWarps), kWarps * 32, 0, stream>>>(
      qkv, rows, heads, head_dim, segments, num_segments, scale, out);
  CheckLaunch("SegmentAttention");
}

}  // namespace m3::kernels::cuda
