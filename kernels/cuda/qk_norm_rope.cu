// QkNormRopeToPages: one warp per (row, head unit), a unit being a q head, a k head, a v head,
// an index q head or the index key. The normed head goes through shared memory so each lane can
// read the partner channel of its rotation.
#include "kernels/cuda/qk_norm_rope.cuh"

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
};

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
  bf16* dst;
  int64_t u = unit;
  if (u < d.q_heads) {
    src = row + u * D;
    w = a.w.q_norm;
    dst = a.q_out + r * qw + u * D;
  } else if ((u -= d.q_heads) < d.kv_heads) {
    src = row + qw + u * D;
    w = a.w.k_norm;
    dst = a.k_pages + slot * kw + u * D;
  } else if ((u -= d.kv_heads) < d.kv_heads) {
    src = row + qw + kw + u * D;
    dst = a.v_pages + slot * kw + u * D;
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
  if (w == nullptr) {
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

void QkNormRopeToPages(const bf16* qkv, int64_t rows, const QkNormRopeDims& d,
                       const QkNormWeightsPtr& w, const float* cos, const float* sin,
                       const int64_t* slots, bf16* q_out, bf16* index_q_out, bf16* k_pages,
                       bf16* v_pages, bf16* index_k_pages, cudaStream_t stream) {
  if (rows <= 0) return;
  if (d.head_dim > kMaxDim || d.index_dim > kMaxDim)
    throw std::runtime_error("QkNormRopeToPages: head dims above 256 are not supported");
  Args a{qkv, d, w, cos, sin, slots, q_out, index_q_out, k_pages, v_pages, index_k_pages, 0, 0};
  a.width = (d.q_heads + 2 * d.kv_heads) * d.head_dim +
            (d.index_heads > 0 ? (d.index_heads + 1) * d.index_dim : 0);
  a.units = d.q_heads + 2 * d.kv_heads + (d.index_heads > 0 ? d.index_heads + 1 : 0);
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((a.units + kWarps - 1) / kWarps));
  LaunchAfterPrior(QkNormRopeKernel, grid, kWarps * 32, 0, stream, a);
  CheckLaunch("QkNormRopeToPages");
}

}  // namespace m3::kernels::cuda
