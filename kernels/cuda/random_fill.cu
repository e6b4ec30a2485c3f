// One thread per 8 normals (a 16-byte bf16 store) or per quantization block (32 MXFP8 codes, two
// 16-byte stores; 16 NVFP4 values, one 8-byte store), grid-stride: the fill is bound by the
// arithmetic of the draws, not by the stores.
#include <cuda_fp8.h>

#include "kernels/counter_normal.h"
#include "kernels/cuda/random_fill.cuh"
#include "kernels/microscaling_block.h"

namespace m3::kernels::cuda {
namespace {

namespace cn = m3::kernels::counter_normal;

constexpr int kThreads = 256;

unsigned GridFor(int64_t units) {
  const int64_t per_wave = int64_t{SmCount()} * 8;  // 8 blocks of 256 threads per SM
  const int64_t b = (units + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < per_wave ? (b > 0 ? b : 1) : per_wave);
}

__device__ inline uint8_t E4M3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

template <typename T>
__device__ inline void Store(T* out, int64_t i, float v);
template <>
__device__ inline void Store(float* out, int64_t i, float v) {
  out[i] = v;
}
template <>
__device__ inline void Store(bf16* out, int64_t i, float v) {
  out[i] = __float2bfloat16_rn(v);
}

template <typename T>
__global__ void NormalKernel(uint64_t key, float mean, float std, int64_t n, T* out) {
  const int64_t units = (n + 7) / 8;
  for (int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; u < units;
       u += int64_t{gridDim.x} * blockDim.x) {
    float v[8];
    for (int p = 0; p < 4; ++p) {
      float z0 = 0.0f, z1 = 0.0f;
      if (std != 0.0f) CounterNormalPair(key, static_cast<uint64_t>(u * 4 + p), z0, z1);
      v[2 * p] = cn::Add(mean, cn::Mul(std, z0));
      v[2 * p + 1] = cn::Add(mean, cn::Mul(std, z1));
    }
    const int64_t first = u * 8;
    if constexpr (sizeof(T) == 2) {
      if (first + 8 <= n) {
        __align__(16) bf16 h[8];
        for (int i = 0; i < 8; ++i) h[i] = __float2bfloat16_rn(v[i]);
        *reinterpret_cast<uint4*>(out + first) = *reinterpret_cast<const uint4*>(h);
        continue;
      }
    }
    for (int i = 0; i < 8 && first + i < n; ++i) Store(out, first + i, v[i]);
  }
}

__global__ void Mxfp8Kernel(uint64_t key, float std, int64_t block0, int64_t blocks, uint8_t* codes,
                            uint8_t* scales) {
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    float w[32];
    float amax = 0.0f;
    for (int p = 0; p < 16; ++p) {
      CounterNormalPair(key, static_cast<uint64_t>((block0 + b) * 16 + p), w[2 * p], w[2 * p + 1]);
      w[2 * p] = cn::Mul(std, w[2 * p]);
      w[2 * p + 1] = cn::Mul(std, w[2 * p + 1]);
      amax = fmaxf(amax, fmaxf(fabsf(w[2 * p]), fabsf(w[2 * p + 1])));
    }
    const int e = Mxfp8BlockExponent(amax);
    scales[b] = static_cast<uint8_t>(e + 127);
    const float inv = Pow2(-e);
    __align__(16) uint8_t c[32];
    for (int i = 0; i < 32; ++i) c[i] = E4M3(cn::Mul(w[i], inv));
    uint4* dst = reinterpret_cast<uint4*>(codes + b * 32);
    dst[0] = reinterpret_cast<const uint4*>(c)[0];
    dst[1] = reinterpret_cast<const uint4*>(c)[1];
  }
}

__global__ void Nvfp4Kernel(uint64_t key, float std, float global, int64_t block0, int64_t blocks,
                            int64_t blocks_per_row, uint8_t* packed, uint8_t* scales,
                            float* row_scale) {
  const float block_div = cn::Mul(kE2M1MaxValue, global);
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    float w[16];
    float amax = 0.0f;
    for (int p = 0; p < 8; ++p) {
      CounterNormalPair(key, static_cast<uint64_t>((block0 + b) * 8 + p), w[2 * p], w[2 * p + 1]);
      w[2 * p] = cn::Mul(std, w[2 * p]);
      w[2 * p + 1] = cn::Mul(std, w[2 * p + 1]);
      amax = fmaxf(amax, fmaxf(fabsf(w[2 * p]), fabsf(w[2 * p + 1])));
    }
    const uint8_t s = E4M3(cn::Div(amax, block_div));
    scales[b] = s;
    const float step = cn::Mul(E4M3Decode(s), global);
    __align__(8) uint8_t c[8];
    for (int i = 0; i < 8; ++i) {
      const uint8_t lo = step > 0.0f ? E2M1Encode(cn::Div(w[2 * i], step)) : 0;
      const uint8_t hi = step > 0.0f ? E2M1Encode(cn::Div(w[2 * i + 1], step)) : 0;
      c[i] = static_cast<uint8_t>(lo | (hi << 4));
    }
    *reinterpret_cast<uint2*>(packed + b * 8) = *reinterpret_cast<const uint2*>(c);
    if (b % blocks_per_row == 0) row_scale[b / blocks_per_row] = global;
  }
}

}  // namespace

void RandomNormalFill(uint64_t seed, float mean, float std, int64_t n, void* out, ElemType t,
                      cudaStream_t stream) {
  if (n <= 0) return;
  const uint64_t key = NormalStreamKey(seed);
  const unsigned grid = GridFor((n + 7) / 8);
  if (t == ElemType::kBF16)
    NormalKernel<<<grid, kThreads, 0, stream>>>(key, mean, std, n, static_cast<bf16*>(out));
  else if (t == ElemType::kF32)
    NormalKernel<<<grid, kThreads, 0, stream>>>(key, mean, std, n, static_cast<float*>(out));
  else
    throw std::runtime_error("RandomNormalFill: the output must be f32 or bf16");
  CheckLaunch("RandomNormalFill");
}

void RandomMxfp8Fill(uint64_t seed, float std, int64_t first_row, int64_t rows, int64_t K,
                     uint8_t* codes, uint8_t* scales, cudaStream_t stream) {
  if (K % 32 != 0) throw std::runtime_error("RandomMxfp8Fill: K must be a multiple of 32");
  const int64_t blocks = rows * (K / 32);
  if (blocks <= 0) return;
  Mxfp8Kernel<<<GridFor(blocks), kThreads, 0, stream>>>(
      NormalStreamKey(seed), std, first_row * (K / 32), blocks, codes, scales);
  CheckLaunch("RandomMxfp8Fill");
}

void RandomNvfp4Fill(uint64_t seed, float std, float global, int64_t first_row, int64_t rows,
                     int64_t K, uint8_t* packed, uint8_t* scales, float* row_scale,
                     cudaStream_t stream) {
  if (K % 16 != 0) throw std::runtime_error("RandomNvfp4Fill: K must be a multiple of 16");
  const int64_t blocks = rows * (K / 16);
  if (blocks <= 0) return;
  Nvfp4Kernel<<<GridFor(blocks), kThreads, 0, stream>>>(NormalStreamKey(seed), std, global,
                                                        first_row * (K / 16), blocks, K / 16,
                                                        packed, scales, row_scale);
  CheckLaunch("RandomNvfp4Fill");
}

}  // namespace m3::kernels::cuda
