// 16-byte bf16 vectors for weight-streaming kernels (the GEMVs of decode-sized batches): eight
// bf16 values in one uint4 load, unpacked to f32, and the warp-level dot product of weight rows
// with a few input rows staged in shared memory.
#pragma once

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

#ifdef __CUDACC__
__device__ __forceinline__ void Unpack8(const uint4& v, float f[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

// acc[r][p] += w[r] . xs[p] over n8 16-byte columns, for NW weight rows (global) and MC input
// rows (shared memory, rows n8 columns apart), lane-partial sums (the caller reduces over the
// warp). Each lane takes columns lane, lane + 32, ...; kUnroll loads per row are issued before
// any is used, so enough bytes are in flight to keep HBM busy.
// xs rows are xs_stride columns apart (n8 when the rows are staged whole; more when the caller
// dots a slice of them).
template <int NW, int MC>
__device__ __forceinline__ void DotRows(const uint4* const (&w)[NW], const uint4* xs, int64_t n8,
                                        float (&acc)[NW][MC], int64_t xs_stride = -1) {
  if (xs_stride < 0) xs_stride = n8;
  constexpr int kUnroll = 4;
  const int lane = threadIdx.x & 31;
  for (int64_t c0 = lane; c0 < n8; c0 += 32 * kUnroll) {
    uint4 wv[NW][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
#pragma unroll
      for (int r = 0; r < NW; ++r) wv[r][u] = c < n8 ? __ldg(w[r] + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= n8) break;
      float fw[NW][8];
#pragma unroll
      for (int r = 0; r < NW; ++r) Unpack8(wv[r][u], fw[r]);
#pragma unroll
      for (int p = 0; p < MC; ++p) {
        float fx[8];
        Unpack8(xs[p * xs_stride + c], fx);
#pragma unroll
        for (int r = 0; r < NW; ++r)
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r][p] = fmaf(fw[r][i], fx[i], acc[r][p]);
      }
    }
  }
}
#endif

}  // namespace m3::kernels::cuda
