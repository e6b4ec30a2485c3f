// Block-scaled weight rows (MXFP8, NVFP4, or plain bf16) as operands of bf16 tensor-core MMAs
// (mma.sync m16n8k16, f32 accumulation), for the weight-streaming kernels of decode-sized
// batches (block_scaled_gemv.cu, the quantized MoE expert GEMVs): a warp owns 16 weight rows
// (the MMA's M) and up to 8 input rows per MMA (its N), and streams the weights with one 16-byte
// load per lane and row per step, dequantized in registers.
//
// The arithmetic is exact up to the f32 accumulation: an e4m3 code times its e8m0 scale, and an
// e2m1 value times its e4m3 scale, are exact in bf16 (at most 6 significant bits), so the MMA
// multiplies the weights of kernels/cpu/microscaling.h exactly; NVFP4's f32 global scale (the
// row_scale) multiplies the f32 result. Codes become bf16 by moving their bits into a bf16 (the
// value times 2^-120 for e4m3, 2^-126 for e2m1, both possibly subnormal) and one bf16 multiply by
// the block scale times the inverse power (bf16 arithmetic keeps subnormals).
//
// The K order inside an MMA is free as long as both operands agree: lane (g, t) feeds the MMA the
// weights it loaded (16 bytes of rows g and g + 8 at the K offset of thread t) and the input
// values at the same K positions, so loads stay contiguous. NVFP4 pairs element i with i + 4 of
// each 8-element word (a bf16x2 register), which makes both halves one shift apart; the inputs
// are paired the same way with a byte permute.
//
// NVFP4 with one input group (decode) takes an f16 form by default (NvHalfForm): each nibble
// becomes an e5m2-like byte (the high byte of an f16 of the value times 2^-14) and a byte permute
// places two as an f16x2, the block scale multiplies as an f16 (s x 2^7, exact), the inputs are
// rounded to f16 (exact for |x| in [2^-14, 65504]) and the MMA is f16 x f16 with f32
// accumulation: fewer integer operations per weight byte, where NVFP4 decode is issue-bound.
//
// Limits (finite weights as checkpoints hold): MXFP8 block scales up to 2^7 (|w| < 57344);
// e4m3 NaN codes and e8m0 0xff are not treated specially.
#pragma once

#include <cstdint>
#include <cstdlib>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

#ifdef __CUDACC__
#define M3_SCALED_HD __host__ __device__
#else
#define M3_SCALED_HD
#endif

enum class WeightKind : int { kBf16 = 0, kMxfp8 = 1, kNvfp4 = 2 };

// Rows [rows, k] of a weight in one of the kinds (linear_weight.h's layouts):
//  kBf16: data bf16 [rows, k];
//  kMxfp8: data e4m3 [rows, k], scales e8m0 [rows, k / 32];
//  kNvfp4: data packed e2m1 [rows, k / 2] (even element in the low nibble), scales e4m3
//          [rows, k / 16], row_scale f32 [rows] (the global scale of each row's tensor).
struct ScaledRows {
  WeightKind kind = WeightKind::kBf16;
  const void* data = nullptr;
  const uint8_t* scales = nullptr;
  const float* row_scale = nullptr;
};

// Bytes of one row's codes.
M3_SCALED_HD inline int64_t RowBytes(WeightKind kind, int64_t k) {
  return kind == WeightKind::kNvfp4 ? k / 2 : kind == WeightKind::kMxfp8 ? k : 2 * k;
}
// K covered by one warp step (4 lanes of 16 bytes per row).
M3_SCALED_HD inline constexpr int64_t StepK(WeightKind kind) {
  return kind == WeightKind::kNvfp4 ? 128 : kind == WeightKind::kMxfp8 ? 64 : 32;
}

// Whether NVFP4 weights with one input group (decode) take the f16 form (APairHalf: fewer
// operations per weight; the inputs rounded to f16, exact for |x| in [2^-14, 65504], which
// RMSNorm, attention and clamped SwiGLU outputs are within) rather than the bf16 one;
// M3_NVFP4_HALF=0 keeps the bf16 form (benchmarks). Read at each launch.
inline bool NvHalfForm() {
  const char* v = std::getenv("M3_NVFP4_HALF");
  return v == nullptr || v[0] != '0';
}

// Whether the weight-streaming kernels prefetch their weights into L2 two rounds ahead (TileMma's
// prefetch; M3_BLOCK_SCALED_PREFETCH=1 turns it on, for benchmarks). Off: on an H200
// (2026-11-28) it slowed every GEMV and MoE case measured (NVFP4 qkv at batch 8: 38.0 against
// 32.4 us without). Read at each launch.
inline bool ScaledPrefetch() {
  const char* v = std::getenv("M3_BLOCK_SCALED_PREFETCH");
  return v != nullptr && v[0] == '1';
}

#ifdef __CUDACC__

template <WeightKind F>
struct Kind {
  static constexpr int64_t kStepK = StepK(F);
  static constexpr int kMmas = static_cast<int>(kStepK / 16);  // MMAs per step
  M3_SCALED_HD static constexpr int64_t kScaleCols(int64_t k) {
    return F == WeightKind::kNvfp4 ? k / 16 : F == WeightKind::kMxfp8 ? k / 32 : 0;
  }
  // The factor the accumulated sums of a row are multiplied by (NVFP4: 2^8 undoes the
  // headroom taken from the block scale, see NvScales).
  static constexpr float kPost = F == WeightKind::kNvfp4 ? 256.0f : 1.0f;
};

// The factor of a row's sums for TileMma<..., H>: the f16 form of NVFP4 carries weights times
// 2^-7 (e2m1 x 2^-14 times the scale x 2^7), the bf16 form Kind::kPost.
template <WeightKind F, bool H>
M3_SCALED_HD constexpr float PostOf() {
  return H ? 128.0f : Kind<F>::kPost;
}

__device__ __forceinline__ uint4 LoadStreaming(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ void Mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void Mma16816F16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                            uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t MulF16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// A bf16x2 as f16x2 (exact for |v| in [2^-14, 65504]; smaller magnitudes become f16 subnormals,
// an absolute error below 2^-25).
__device__ __forceinline__ uint32_t Bf16x2ToF16x2(uint32_t v) {
  const __half2 h = __floats2half2_rn(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint32_t MulBf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// e8m0 code e as a bf16x2 of 2^(e - 7) (the e4m3 bits carry 2^-120): saturated at 2^127.
__device__ __forceinline__ uint32_t MxScale(uint32_t e) {
  const uint32_t f = min(e + 120u, 254u) << 7;
  return f | (f << 16);
}
// The two e4m3 block scales of `two` (low byte: out[0]), each as a bf16x2 of s * 2^118 (the e2m1
// bits carry 2^-126; 2^-8 of headroom keeps 448 * 2^118 in range, undone by Kind::kPost),
// converted together: one e4m3x2 conversion, two f32 multiplies and one f32x2 -> bf16x2 rounding
// (exact: 4 significant bits).
__device__ __forceinline__ void NvScales(uint32_t two, uint32_t (&out)[2]) {
  const __half2_raw h2 =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), __NV_E4M3);
  const float2 f = __half22float2(__half2(h2));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * 0x1p118f, f.y * 0x1p118f);
  const uint32_t bits = *reinterpret_cast<const uint32_t*>(&b);
  out[0] = __byte_perm(bits, 0u, 0x1010u);
  out[1] = __byte_perm(bits, 0u, 0x3232u);
}

// The f16 form of NVFP4 (HalfA): the two e4m3 block scales of `two` as f16x2 (s x 2^7, s x 2^7)
// (exact: at most 448 x 2^7 < 65504, at least 2^-9 x 2^7).
__device__ __forceinline__ void NvScalesHalf(uint32_t two, uint32_t (&out)[2]) {
  const __half2_raw h2 =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), __NV_E4M3);
  const uint32_t bits = MulF16x2(*reinterpret_cast<const uint32_t*>(&h2), 0x58005800u);  // 2^7
  out[0] = __byte_perm(bits, 0u, 0x1010u);
  out[1] = __byte_perm(bits, 0u, 0x3232u);
}

// The f16 form of NVFP4's A operand: each e2m1 nibble s|e1 e0|m of a word becomes the byte
// s 000 e1 e0 m 0, an e5m2 code (the high byte of an f16) of the value times 2^-14 (subnormal for
// e = 0, as e2m1's), then one byte permute per f16x2 places two of them: per word 7 bit operations
// and 4 permutes where the bf16 form takes 16 operations. Pairs as APair's NVFP4 branch: (e0, e4)
// and (e1, e5) for even j, (e2, e6) and (e3, e7) for odd j. scale: NvScalesHalf's.
__device__ __forceinline__ void APairHalf(const uint4& q, const uint32_t (&scale)[2], int j,
                                          uint32_t& lo, uint32_t& hi) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  const uint32_t v = w[j >> 1];
  const uint32_t even = ((v << 1) & 0x0e0e0e0eu) | ((v << 4) & 0x80808080u);  // e0, e2, e4, e6
  const uint32_t odd = ((v >> 3) & 0x0e0e0e0eu) | (v & 0x80808080u);          // e1, e3, e5, e7
  const uint32_t sel = (j & 1) == 0 ? 0x2404u : 0x3414u;  // bytes (0, 2) or (1, 3), as high bytes
  const uint32_t s = scale[j >> 2];
  lo = MulF16x2(__byte_perm(even, 0u, sel), s);
  hi = MulF16x2(__byte_perm(odd, 0u, sel), s);
}

// Two e4m3 codes (bytes 0 and 1 of the permute's output) as bf16x2 bits, times 2^-120.
__device__ __forceinline__ uint32_t E4m3PairBits(uint32_t word, uint32_t selector) {
  const uint32_t h = __byte_perm(word, 0u, selector);  // the codes in bytes 1 and 3
  return ((h >> 4) & 0x07f007f0u) | (h & 0x80008000u);
}

// The A operand of MMA j of a step from one lane's 16 bytes of a row: lo (K 2t, 2t + 1) and hi
// (K 2t + 8, 2t + 9) bf16x2 registers, scaled. scale: the row's bf16x2 scale of the words used.
template <WeightKind F>
__device__ __forceinline__ void APair(const uint4& q, const uint32_t (&scale)[2], int j,
                                      uint32_t& lo, uint32_t& hi) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  if constexpr (F == WeightKind::kBf16) {
    lo = w[2 * j];
    hi = w[2 * j + 1];
  } else if constexpr (F == WeightKind::kMxfp8) {
    lo = MulBf16x2(E4m3PairBits(w[j], 0x1404u), scale[0]);
    hi = MulBf16x2(E4m3PairBits(w[j], 0x3424u), scale[0]);
  } else {
    const uint32_t v = w[j >> 1];
    uint32_t a, b;
    if ((j & 1) == 0) {  // (e0, e4), (e1, e5)
      a = ((v << 6) & 0x01c001c0u) | ((v << 12) & 0x80008000u);
      b = ((v << 2) & 0x01c001c0u) | ((v << 8) & 0x80008000u);
    } else {  // (e2, e6), (e3, e7)
      a = ((v >> 2) & 0x01c001c0u) | ((v << 4) & 0x80008000u);
      b = ((v >> 6) & 0x01c001c0u) | (v & 0x80008000u);
    }
    const uint32_t s = scale[j >> 2];  // words 0, 1: the first block of 16; 2, 3: the second
    lo = MulBf16x2(a, s);
    hi = MulBf16x2(b, s);
  }
}

// A lane's raw scale bits at step s (lane t of its quad): NVFP4 the two e4m3 codes of its 32
// elements, MXFP8 the e8m0 code of its 16.
template <WeightKind F>
__device__ __forceinline__ uint32_t ScaleBitsAt(const uint8_t* scales_row, int64_t s, int t) {
  if constexpr (F == WeightKind::kNvfp4)
    return __ldg(reinterpret_cast<const uint16_t*>(scales_row + 8 * s + 2 * t));
  else if constexpr (F == WeightKind::kMxfp8)
    return __ldg(scales_row + 2 * s + (t >> 1));
  else
    return 0;
}

// Raw scale bits (ScaleBitsAt's) as the multipliers APair / APairHalf take.
template <WeightKind F, bool H = false>
__device__ __forceinline__ void ScalesOfBits(uint32_t bits, uint32_t (&out)[2]) {
  if constexpr (H) {
    static_assert(F == WeightKind::kNvfp4, "the f16 form is NVFP4's");
    NvScalesHalf(bits, out);
  } else if constexpr (F == WeightKind::kMxfp8) {
    out[0] = MxScale(bits);
    out[1] = out[0];
  } else if constexpr (F == WeightKind::kNvfp4) {
    NvScales(bits, out);
  } else {
    out[0] = out[1] = 0;
  }
}

// Row scales of a lane's 16 bytes at step s (lane t of its quad).
template <WeightKind F, bool H = false>
__device__ __forceinline__ void LoadScales(const uint8_t* scales_row, int64_t s, int t,
                                           uint32_t (&out)[2]) {
  ScalesOfBits<F, H>(ScaleBitsAt<F>(scales_row, s, t), out);
}

// A 16-row weight tile as a lane sees it: rows g and g + 8 (codes and scales).
struct TileLane {
  const uint8_t* code[2];
  const uint8_t* scale[2];
};

template <WeightKind F>
__device__ __forceinline__ TileLane TileOf(const ScaledRows& w, int64_t row0, int64_t rows,
                                           int64_t k) {
  const int g = (threadIdx.x & 31) >> 2;
  TileLane l;
  for (int r = 0; r < 2; ++r) {
    const int64_t row = min(row0 + g + 8 * r, rows - 1);  // rows past the end: discarded
    l.code[r] = static_cast<const uint8_t*>(w.data) + row * RowBytes(F, k);
    l.scale[r] = F == WeightKind::kBf16 ? nullptr : w.scales + row * Kind<F>::kScaleCols(k);
  }
  return l;
}

// The B operand of MMA j for the input row x (null: zeros) at the lane's K offset kx of a step:
// two bf16x2 registers, K-paired as APair pairs the weights.
template <WeightKind F, bool H = false>
__device__ __forceinline__ void LoadB(const bf16* x, int64_t kx, int j, uint32_t& b0,
                                      uint32_t& b1) {
  if (x == nullptr) {
    b0 = b1 = 0;
    return;
  }
  if constexpr (F == WeightKind::kNvfp4) {
    const bf16* p = x + kx + 8 * (j >> 1) + 2 * (j & 1);
    const uint32_t lo = __ldg(reinterpret_cast<const unsigned int*>(p));
    const uint32_t hi = __ldg(reinterpret_cast<const unsigned int*>(p + 4));
    b0 = __byte_perm(lo, hi, 0x5410u);  // (x0, x4)
    b1 = __byte_perm(lo, hi, 0x7632u);  // (x1, x5)
    if constexpr (H) {
      b0 = Bf16x2ToF16x2(b0);
      b1 = Bf16x2ToF16x2(b1);
    }
  } else {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(x + kx + 4 * j));
    b0 = v.x;
    b1 = v.y;
  }
}

// Steps over a row of k (k a multiple of 32: the last step may be partial, its lanes beyond k
// idle).
M3_SCALED_HD inline int64_t StepsOf(WeightKind kind, int64_t k) {
  return (k + StepK(kind) - 1) / StepK(kind);
}

// Asks L2 for the 64 bytes of a row that a quad's lanes load at a later step (no registers
// held: the warp's next round of loads then finds its lines in L2 or on their way).
__device__ __forceinline__ void PrefetchL2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// One warp step of TileMma: acc += the tiles' weights q (a lane's 16 bytes of rows g and g + 8,
// with their scales sc) times the inputs at the lane's K offset kx (in_row false: the lane's part
// lies past the row's end, zeros).
template <WeightKind F, int NTILE, int NT, bool H>
__device__ __forceinline__ void StepMma(const uint4 (&q)[NTILE][2],
                                        const uint32_t (&sc)[NTILE][2][2],
                                        const bf16* const (&xrow)[NT], int64_t kx, bool in_row,
                                        float (&acc)[NTILE][NT][4]) {
#pragma unroll
  for (int j = 0; j < Kind<F>::kMmas; ++j) {
    uint32_t a[NTILE][4];
#pragma unroll
    for (int i = 0; i < NTILE; ++i) {
      if constexpr (H) {
        APairHalf(q[i][0], sc[i][0], j, a[i][0], a[i][2]);
        APairHalf(q[i][1], sc[i][1], j, a[i][1], a[i][3]);
      } else {
        APair<F>(q[i][0], sc[i][0], j, a[i][0], a[i][2]);
        APair<F>(q[i][1], sc[i][1], j, a[i][1], a[i][3]);
      }
    }
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      uint32_t b0, b1;
      LoadB<F, H>(in_row ? xrow[n] : nullptr, kx, j, b0, b1);
#pragma unroll
      for (int i = 0; i < NTILE; ++i) {
        if constexpr (H)
          Mma16816F16(acc[i][n], a[i][0], a[i][1], a[i][2], a[i][3], b0, b1);
        else
          Mma16816(acc[i][n], a[i][0], a[i][1], a[i][2], a[i][3], b0, b1);
      }
    }
  }
}

// acc[i][n] (C fragments: rows g, g + 8 of tile i, input rows 2t, 2t + 1 of group n) +=
// tile_i . x over the warp's steps s = s0, s0 + stride, ... < s1 of rows of k. xrow[n]: the
// input row lane group g of group n reads (null: zeros). U steps' weight loads are issued
// before any is used; the inputs (a few KB, shared by every warp) come from L1. prefetch: each
// round also asks L2 for the weight rows of the warp's round two later (the first round for the
// next one too), which triples the bytes in flight per warp without registers (the kernels are
// bound by latency: too few loads in flight); a block's prefetched bytes stay at most
// 2 x 8 warps x 64 rows x 64 bytes (64 KB, 17 MB for all resident blocks: well inside L2).
template <WeightKind F, int NTILE, int NT, int U, bool H = false>
__device__ __forceinline__ void TileMma(const TileLane (&tile)[NTILE],
                                        const bf16* const (&xrow)[NT], int64_t s0, int64_t s1,
                                        int64_t stride, int64_t k, float (&acc)[NTILE][NT][4],
                                        bool prefetch = false) {
  using KT = Kind<F>;
  const int t = threadIdx.x & 3;
  for (int64_t s = s0; s < s1; s += U * stride) {
    uint4 q[U][NTILE][2];
    uint32_t sc[U][NTILE][2][2];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t su = s + u * stride;
      const bool ok = su < s1 && su * KT::kStepK + t * (KT::kStepK / 4) < k;
#pragma unroll
      for (int i = 0; i < NTILE; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r)
          q[u][i][r] =
              ok ? LoadStreaming(tile[i].code[r] + su * 64 + 16 * t) : make_uint4(0, 0, 0, 0);
    }
    if (prefetch && t == 0) {
      auto round = [&](int64_t first) {  // the U steps of a later round of the warp
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t su = first + u * stride;
          if (su < s1 && su * KT::kStepK < k)
#pragma unroll
            for (int i = 0; i < NTILE; ++i)
#pragma unroll
              for (int r = 0; r < 2; ++r) PrefetchL2(tile[i].code[r] + su * 64);
        }
      };
      round(s + 2 * U * stride);
      if (s == s0) round(s + U * stride);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t su = s + u * stride;
      const bool ok = su < s1 && su * KT::kStepK + t * (KT::kStepK / 4) < k;
#pragma unroll
      for (int i = 0; i < NTILE; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if (ok) {
            LoadScales<F, H>(tile[i].scale[r], su, t, sc[u][i][r]);
          } else {
            sc[u][i][r][0] = 0;
            sc[u][i][r][1] = 0;
          }
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t su = s + u * stride;
      if (su >= s1) break;
      const int64_t kx = su * KT::kStepK + t * (KT::kStepK / 4);
      StepMma<F, NTILE, NT, H>(q[u], sc[u], xrow, kx, kx < k, acc);
    }
  }
}

#endif  // __CUDACC__

}  // namespace m3::kernels::cuda
