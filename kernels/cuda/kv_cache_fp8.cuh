// The FP8 (e4m3) KV cache on the GPU, the twin of kernels/cpu/kv_cache_fp8.h: K and V pages hold
// e4m3 codes [slots, kv_heads, head_dim] of x / scale with one float32 scale per (slot, kv head),
// [slots, kv_heads] (scale = max|x| / 448, 1 for an all-zero vector; round to nearest even,
// saturated), written by QkNormRopeToPages (qk_norm_rope.cuh). The attention entry points take
// their pages as KvPages (bf16 or FP8) and launch a kernel instantiation for each: an FP8 one
// stages a tile's codes and scales into the bf16 tile's place with cp.async (8 bytes of codes
// and the 4-byte scale in each 16-byte chunk slot, Fp8GroupKv), then after the copy's wait each
// thread turns the chunks it staged into bf16 (code * scale in f32, rounded to bf16;
// DequantTiles), and the tile runs through the same tensor-core code as a bf16 one: half the
// K/V bytes read, the same accumulation in f32. The bf16 instantiations are the kernels as they
// were (the FP8 steps are `if constexpr`), so their code and speed do not change.
#pragma once

#include <cstdint>

#include "kernels/cuda/attention_tile.cuh"
#include "kernels/cuda/cuda_util.cuh"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace m3::kernels::cuda {

// The K/V pages an attention kernel reads: bf16 [slots, kv_heads, head_dim], or, with k_scales
// set, FP8 e4m3 codes of that shape and float32 scales [slots, kv_heads].
struct KvPages {
  const void* k = nullptr;
  const void* v = nullptr;
  const float* k_scales = nullptr;
  const float* v_scales = nullptr;
  bool fp8() const { return k_scales != nullptr; }
};

inline KvPages Bf16Kv(const bf16* k, const bf16* v) {
  return {k, v, nullptr, nullptr};
}
inline KvPages Fp8Kv(const uint8_t* k, const uint8_t* v, const float* k_scales,
                     const float* v_scales) {
  return {k, v, k_scales, v_scales};
}

// The FP8 cache a step's K / V are quantized into (QkNormRopeToPages).
struct Fp8KvOut {
  uint8_t* k = nullptr;  // [slots, kv_heads, head_dim] codes
  uint8_t* v = nullptr;
  float* k_scales = nullptr;  // [slots, kv_heads]
  float* v_scales = nullptr;
};

#ifdef __CUDACC__
namespace attn {

// 8 / 4 bytes global -> shared, asynchronously (.ca: the sizes below 16); zero-filled when
// !valid (src is then not read).
__device__ __forceinline__ void CpAsync8(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem),
               "r"(valid ? 8 : 0));
}
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem),
               "r"(valid ? 4 : 0));
}

// One e4m3 code as a float (exact: every e4m3 value is a half).
__device__ __forceinline__ float E4M3ToFloat(uint8_t code) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
}

// Two e4m3 codes (the low one first in memory) times s, as a bf16 pair.
__device__ __forceinline__ uint32_t DequantPair(uint32_t codes, float s) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xffffu), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  return PackBf16(f.x * s, f.y * s);
}

// A staged FP8 chunk slot (8 codes, then their float scale) rewritten as its 8 bf16 values.
__device__ __forceinline__ void DequantChunk(bf16* chunk) {
  const uint2 c = *reinterpret_cast<const uint2*>(chunk);
  const float s = reinterpret_cast<const float*>(chunk)[2];
  uint4 o;
  o.x = DequantPair(c.x, s);
  o.y = DequantPair(c.x >> 16, s);
  o.z = DequantPair(c.y, s);
  o.w = DequantPair(c.y >> 16, s);
  *reinterpret_cast<uint4*>(chunk) = o;
}

// One KV group's FP8 pages as a kernel stages them into its shared tiles.
struct Fp8GroupKv {
  const uint8_t* k;  // the group's first channel
  const uint8_t* v;
  const float* k_scale;  // the group's scale of slot 0
  const float* v_scale;
  int64_t stride;  // kv_heads * head_dim
  int64_t hkv;
  __device__ __forceinline__ Fp8GroupKv(const void* k_pages, const void* v_pages,
                                        const float* k_scales, const float* v_scales, int64_t g,
                                        int64_t heads, int64_t dim)
      : k(static_cast<const uint8_t*>(k_pages) + g * dim),
        v(static_cast<const uint8_t*>(v_pages) + g * dim),
        k_scale(k_scales + g),
        v_scale(v_scales + g),
        stride(heads * dim),
        hkv(heads) {}
  // Chunk `ch` (8 channels) of the key at `slot` into the 16-byte tile slots sk / sv: its codes
  // in the first 8 bytes, the key's scale in the next 4 (zeros when !ok).
  __device__ __forceinline__ void Stage(bf16* sk, bf16* sv, int64_t slot, int ch, bool ok) const {
    const int64_t off = ok ? slot * stride + ch * 8 : 0, at = ok ? slot * hkv : 0;
    CpAsync8(sk, k + off, ok);
    CpAsync4(sk + 4, k_scale + at, ok);
    CpAsync8(sv, v + off, ok);
    CpAsync4(sv + 4, v_scale + at, ok);
  }
};

// After the wait for a stage's copies and before the barrier that publishes its tiles: the
// chunks this thread staged (indices first, first + step, ... below keys * D / 8, chunk i being
// channels (i % (D / 8)) * 8.. of key i / (D / 8), as the staging loops number them) turned
// into bf16.
template <int D>
__device__ __forceinline__ void DequantTiles(bf16* sk, bf16* sv, int first, int step, int keys) {
  constexpr int kChunks = D / 8;
  for (int i = first; i < keys * kChunks; i += step) {
    const int off = TileOffset<D>(i / kChunks, i % kChunks);
    DequantChunk(sk + off);
    DequantChunk(sv + off);
  }
}

}  // namespace attn
#endif  // __CUDACC__

}  // namespace m3::kernels::cuda
