// DequantizeScaledRows: one thread per 16 bytes of codes (16 MXFP8 or 32 NVFP4 values), written
// as 16-byte bf16 vectors.
#include "kernels/cuda/block_scaled_dequantize.cuh"

#include <cuda_fp8.h>

namespace m3::kernels::cuda {
namespace {

__device__ __forceinline__ float E4m3(uint32_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

__device__ __forceinline__ float E2m1(uint32_t nibble) {
  const uint32_t mag = nibble & 7u, e = mag >> 1, m = mag & 1u;
  const float v = e == 0
                      ? 0.5f * static_cast<float>(m)
                      : (1.0f + 0.5f * static_cast<float>(m)) * static_cast<float>(1u << (e - 1));
  return nibble & 8u ? -v : v;
}

__device__ __forceinline__ uint32_t PackBf16(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

__global__ void DequantizeKernel(ScaledRows w, int64_t row0, int64_t rows, int64_t k,
                                 bool row_scaled, bf16* out) {
  ChainedKernelStart();
  const int64_t per_row = RowBytes(w.kind, k) / 16;
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= rows * per_row) return;
  const int64_t r = i / per_row, c = i % per_row, row = row0 + r;
  const uint8_t* codes = static_cast<const uint8_t*>(w.data) + row * RowBytes(w.kind, k);
  const uint4 q = __ldg(reinterpret_cast<const uint4*>(codes) + c);
  const uint8_t* b = reinterpret_cast<const uint8_t*>(&q);
  if (w.kind == WeightKind::kMxfp8) {
    const uint32_t e = w.scales[row * (k / 32) + c / 2];
    const float s = e == 0 ? 0x1p-127f : __uint_as_float(e << 23);
    uint4 o[2];
    uint32_t* ow = reinterpret_cast<uint32_t*>(o);
    for (int j = 0; j < 8; ++j) ow[j] = PackBf16(E4m3(b[2 * j]) * s, E4m3(b[2 * j + 1]) * s);
    uint4* dst = reinterpret_cast<uint4*>(out + r * k + c * 16);
    dst[0] = o[0];
    dst[1] = o[1];
  } else {
    const float global = row_scaled ? w.row_scale[row] : 1.0f;
    const uint8_t* sc = w.scales + row * (k / 16) + c * 2;
    const float s0 = E4m3(sc[0]) * global, s1 = E4m3(sc[1]) * global;
    uint4 o[4];
    uint32_t* ow = reinterpret_cast<uint32_t*>(o);
    for (int j = 0; j < 16; ++j) {
      const float s = j < 8 ? s0 : s1;
      ow[j] = PackBf16(E2m1(b[j] & 15u) * s, E2m1(b[j] >> 4) * s);
    }
    uint4* dst = reinterpret_cast<uint4*>(out + r * k + c * 32);
    for (int v = 0; v < 4; ++v) dst[v] = o[v];
  }
}

}  // namespace

void DequantizeScaledRows(const ScaledRows& w, int64_t row0, int64_t rows, int64_t k, bf16* out,
                          cudaStream_t stream, bool row_scaled) {
  if (rows <= 0) return;
  if (w.kind == WeightKind::kBf16 || k % 32 != 0)
    throw std::runtime_error("DequantizeScaledRows: not a block-scaled weight of k % 32 == 0");
  const int64_t threads = rows * (RowBytes(w.kind, k) / 16);
  LaunchAfterPrior(DequantizeKernel, Blocks(threads, 256), 256, 0, stream, w, row0, rows, k,
                   row_scaled, out);
  CheckLaunch("DequantizeScaledRows");
}

}  // namespace m3::kernels::cuda
