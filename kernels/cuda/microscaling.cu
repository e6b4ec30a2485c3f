// One thread per 8 output elements (a 16-byte store): the products in the CPU twin's order.
#include "kernels/counter_normal.h"
#include "kernels/cuda/microscaling.cuh"
#include "kernels/microscaling_block.h"

namespace m3::kernels::cuda {
namespace {

namespace cn = m3::kernels::counter_normal;

constexpr int kThreads = 256;

__device__ inline float E2M1Decode(uint32_t nibble) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (nibble & 8) ? -mag[nibble & 7] : mag[nibble & 7];
}

__global__ void Mxfp8Kernel(const uint8_t* codes, const uint8_t* scales, int64_t units, bf16* out) {
  for (int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; u < units;
       u += int64_t{gridDim.x} * blockDim.x) {
    const int64_t first = u * 8;  // K is a multiple of 32: 8 elements share a scale
    const float s = Pow2(static_cast<int>(scales[first / 32]) - 127);
    const uint2 c = *reinterpret_cast<const uint2*>(codes + first);
    const uint8_t* b = reinterpret_cast<const uint8_t*>(&c);
    __align__(16) bf16 h[8];
    for (int i = 0; i < 8; ++i) h[i] = __float2bfloat16_rn(cn::Mul(E4M3Decode(b[i]), s));
    *reinterpret_cast<uint4*>(out + first) = *reinterpret_cast<const uint4*>(h);
  }
}

__global__ void Nvfp4Kernel(const uint8_t* packed, const uint8_t* scales, const float* row_scale,
                            int64_t K, int64_t units, bf16* out) {
  for (int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; u < units;
       u += int64_t{gridDim.x} * blockDim.x) {
    const int64_t first = u * 8;  // K is a multiple of 16: 8 elements share a scale and a row
    const float s = E4M3Decode(scales[first / 16]), g = row_scale[first / K];
    const uint32_t c = *reinterpret_cast<const uint32_t*>(packed + first / 2);
    __align__(16) bf16 h[8];
    for (int i = 0; i < 8; ++i)
      h[i] = __float2bfloat16_rn(cn::Mul(cn::Mul(E2M1Decode((c >> (4 * i)) & 15), s), g));
    *reinterpret_cast<uint4*>(out + first) = *reinterpret_cast<const uint4*>(h);
  }
}

unsigned GridFor(int64_t units) {
  const int64_t per_wave = int64_t{SmCount()} * 8;
  const int64_t b = (units + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < per_wave ? (b > 0 ? b : 1) : per_wave);
}

}  // namespace

void DequantizeMxfp8ToBf16(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t K,
                           bf16* out, cudaStream_t stream) {
  if (K % 32 != 0) throw std::runtime_error("DequantizeMxfp8ToBf16: K must be a multiple of 32");
  const int64_t units = rows * K / 8;
  if (units <= 0) return;
  Mxfp8Kernel<<<GridFor(units), kThreads, 0, stream>>>(codes, scales, units, out);
  CheckLaunch("DequantizeMxfp8ToBf16");
}

void DequantizeNvfp4ToBf16(const uint8_t* packed, const uint8_t* scales, const float* row_scale,
                           int64_t rows, int64_t K, bf16* out, cudaStream_t stream) {
  if (K % 16 != 0) throw std::runtime_error("DequantizeNvfp4ToBf16: K must be a multiple of 16");
  const int64_t units = rows * K / 8;
  if (units <= 0) return;
  Nvfp4Kernel<<<GridFor(units), kThreads, 0, stream>>>(packed, scales, row_scale, K, units, out);
  CheckLaunch("DequantizeNvfp4ToBf16");
}

}  // namespace m3::kernels::cuda
