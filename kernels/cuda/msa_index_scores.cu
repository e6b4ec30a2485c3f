// Decode scan: one block of 4 warps per (one-row sequence, run of 1 to 8 key blocks); each key
// block (32 KB bf16, 16 KB FP8) streams into shared memory by cp.async, the next one in flight
// while the current one is scored, on tensor cores with the 128 keys as the MMA M dimension and
// the row's heads padded into N = 8 (the issue's decode layout); each warp copies and scores its
// own 32 keys (one slot lookup per lane and block, one barrier per block for the block max of
// each head from the warps' maxima). 128K at batch 1: 14.6 -> 9.7 us once the per-chunk address
// arithmetic (a 64-bit division by the page size per 16-byte copy) was gone. FP8 codes become
// bf16 by integer operations in registers (E4m3x4ToScaledBf16) and an FP8 scan keeps two blocks
// in flight: 128K batch 1 FP8 scan 8.1 -> 5.8 us (keys partly in L2). Both copy their first key
// blocks before waiting on the previous kernel.
// Prefill: 8 warps per block, each one m16 tile of the 128 query vectors (A fragments kept in
// registers for the whole key range) against all 128 keys of a block (B fragments by ldmatrix
// from an XOR-swizzled tile), so each warp has its queries' block maxima without a cross-warp
// combine and a key block costs one barrier; at 128 registers two blocks fit on an SM (128K
// prefill: 205 TFLOP/s, against 160 for 2 m16 tiles x 64 keys per warp at one block per SM).
// bf16 tiles double-buffered by cp.async, FP8 tiles loaded into registers one block ahead and
// converted on the store to shared memory.
#include <cfloat>
#include <cstdlib>
#include <type_traits>

#include "kernels/cuda/msa_index_scores.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kDim = 128;
constexpr int kBlock = 128;
constexpr int kDecodeWarps = 4;
constexpr int kPrefillThreads = 256;
constexpr int kQueryTile = 128;    // query vectors (rows x heads) per prefill block
constexpr int kBlocksPerCta = 16;  // key blocks per prefill block (8: 128K indexer +4%)

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ int Swizzled(int key, int chunk) {
  return key * kDim + ((chunk ^ (key & 7)) * 8);
}

__device__ __forceinline__ void CpAsync16(void* dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(n));
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void CpAsyncWait0() {
  asm volatile("cp.async.wait_group 0;\n" ::);
}
__device__ __forceinline__ void CpAsync4(void* dst, const void* src, bool valid) {
  const int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(n));
}

__device__ __forceinline__ void Mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t PackBf16(float2 v) {
  const __nv_bfloat162 b = __floats2bfloat162_rn(v.x, v.y);
  return *reinterpret_cast<const uint32_t*>(&b);
}

// ---- decode ----

template <int S>  // pipeline stages
struct ScanSmem16 {
  bf16 keys[S][kBlock * kDim];     // swizzled as the prefill tiles
  float part[2][kDecodeWarps][8];  // by block parity: one barrier per block
};
template <int S>
struct ScanSmem8 {
  uint8_t codes[S][kBlock * kDim];  // [key][dim], 16-byte chunks XOR key & 7
  float scale[S][kBlock];
  float part[2][kDecodeWarps][8];
};

template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// FP8 keys enter the MMAs as bf16 whose value is the code's times 2^-120, made with integer
// operations: an e4m3 code's magnitude bits shifted under bf16's exponent field are the same
// number read with exponent bias 127 instead of 7, subnormal codes included (both formats have
// an exponent field of zero there). The cvt path (e4m3x2 -> f16x2 -> 2 x f32 -> bf16x2 per two
// codes) ran at the conversion units' quarter rate and bound the FP8 scan. The queries are
// scaled by 2^64 (exact for |q| < 2^64) and the scores by 2^56, so products stay normal floats
// and every score is the one the converted keys would give.
constexpr float kFp8QueryScale = 0x1p64f;
constexpr float kFp8ScoreScale = 0x1p56f;

// Codes d0..d3 (low byte first) -> bf16x2 {d0, d1} and {d2, d3}, each value code * 2^-120.
__device__ __forceinline__ uint2 E4m3x4ToScaledBf16(uint32_t x) {
  const uint32_t t0 = __byte_perm(x, 0u, 0x4140), t1 = __byte_perm(x, 0u, 0x4342);
  // (t << 4) puts the magnitude under the exponent field and the sign at bit 11 (27); adding
  // the sign times 240 carries it to bit 15 (31).
  return make_uint2((t0 << 4) + (t0 & 0x00800080u) * 240u, (t1 << 4) + (t1 & 0x00800080u) * 240u);
}

__device__ __forceinline__ uint32_t ScaledBf16x2(uint32_t pair) {
  const __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&pair);
  return PackBf16(make_float2(__low2float(v) * kFp8QueryScale, __high2float(v) * kFp8QueryScale));
}

// One row's key blocks [b_begin, b_end) streamed through an S-stage cp.async pipeline; per block
// each warp scores its 32 keys (2 m16 tiles, keys as M) against the row's heads (N = 8, heads
// past H zero) on tensor cores, then the block max per head.
template <int H, bool kFp8, int S>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    DecodeScoresKernel(const bf16* index_q, IndexKeys keys, PagedLayout L, int64_t max_blocks,
                       bool all_rows, int blocks_per_cta, float* scores) {
  using Smem = typename std::conditional<kFp8, ScanSmem8<S>, ScanSmem16<S>>::type;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  // One grid row per sequence (a decode row is its sequence's only row): rows == seqs when
  // all_rows, else the sequences with more rows (prefill tiles) are skipped.
  const int64_t s = blockIdx.x;
  const int64_t r = all_rows ? s : L.query_start[s];
  if (!all_rows && L.query_start[s + 1] - r != 1) return;
  const int64_t pos = L.PositionOf(s, r);
  const int64_t b_begin = int64_t{blockIdx.y} * blocks_per_cta;
  const int64_t b_last = pos / kBlock + 1;
  const int64_t b_end = b_begin + blocks_per_cta < b_last ? b_begin + blocks_per_cta : b_last;
  if (b_begin >= b_end) return;

  // Each warp copies the 32 keys it scores (so it waits for its own copies only), and lane l
  // looks up the slot of the warp's key l once per block (32-bit: context positions fit); the
  // copies take slots by shuffle. Address arithmetic per copied chunk was most of the scan's
  // instructions.
  auto issue = [&](int64_t b, int st) {
    const int32_t j = static_cast<int32_t>(b * kBlock) + warp * 32 + lane;
    const bool mine_valid = j <= pos;
    const int64_t mine = mine_valid ? L.Slot(s, j) : 0;
    if constexpr (kFp8) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int kl = (lane >> 3) + 4 * i, n = warp * 32 + kl, ch = lane & 7;
        const int64_t slot = __shfl_sync(0xffffffffu, mine, kl);
        const bool valid = __shfl_sync(0xffffffffu, mine_valid, kl);
        CpAsync16(&sm.codes[st][n * kDim + ((ch ^ (n & 7)) * 16)],
                  keys.fp8_codes + slot * kDim + ch * 16, valid);
      }
      CpAsync4(&sm.scale[st][warp * 32 + lane], keys.fp8_scales + mine, mine_valid);
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int kl = (lane >> 4) + 2 * i, n = warp * 32 + kl, ch = lane & 15;
        const int64_t slot = __shfl_sync(0xffffffffu, mine, kl);
        const bool valid = __shfl_sync(0xffffffffu, mine_valid, kl);
        CpAsync16(&sm.keys[st][Swizzled(n, ch)], keys.bf16_keys + slot * kDim + ch * 8, valid);
      }
    }
    CpAsyncCommit();
  };

  // The first stages' copies go out before the wait on the previous kernel, so they overlap its
  // run. The layout and the keys of a block wholly before the row's position were written before
  // the previous kernel started (the layout is uploaded before a step's kernels; the block
  // holding the position takes this step's key, written by a kernel in the chain, and is copied
  // after the wait); scores are written only after it. 128K batch 1 after a step's key write,
  // bf16 keys: 20.5 -> 19.4 us. FP8 keys, with no key in L2 (the benchmark's data rotating, as
  // a step's other layers evict it) and runs of 4 blocks: 18.4 -> 17.2 us.
  const int64_t old_end = pos / kBlock;  // blocks below hold earlier steps' keys only
  int early = 0;
  while (early < S - 1 && b_begin + early < b_end && b_begin + early < old_end) {
    issue(b_begin + early, early);
    ++early;
  }
  ChainedKernelStart();
  // B fragments: column n = head g (zero past H), k = the 16 dims of each k step. With FP8
  // keys the dims are permuted, the same way for keys and queries: thread c's k slots of step
  // ks are dims 64 (ks / 4) + 16c + 4 (ks % 4) .. +3 (so its codes of a key are two 16-byte
  // loads, chunks c and c + 4), and the queries are scaled (kFp8QueryScale). With chunks 2c and
  // 2c + 1 instead (dims 32c + 4ks ..), 128K batch 1 with no key in L2: FP8 scan 7.9-8.0 ->
  // 7.1-7.2 us, chained with the attention 16.1-16.4 -> 15.8-15.9 us (H100, not understood: the
  // same loads, conflict-free either way).
  uint32_t bq[8][2];
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int dim =
          kFp8 ? 64 * (ks / 4) + 16 * c + 4 * (ks % 4) + 2 * hi : ks * 16 + hi * 8 + 2 * c;
      const uint32_t pair =
          g < H ? *reinterpret_cast<const uint32_t*>(index_q + (r * H + g) * kDim + dim) : 0u;
      bq[ks][hi] = kFp8 ? ScaledBf16x2(pair) : pair;
    }

  for (int i = early; i < S - 1; ++i)
    if (b_begin + i < b_end)
      issue(b_begin + i, i);
    else
      CpAsyncCommit();  // empty groups keep the wait count uniform
  for (int64_t b = b_begin; b < b_end; ++b) {
    const int st = static_cast<int>((b - b_begin) % S);
    if (b + S - 1 < b_end)
      issue(b + S - 1, static_cast<int>((b - b_begin + S - 1) % S));
    else
      CpAsyncCommit();
    CpAsyncWait<S - 1>();
    __syncwarp();  // the warp's own keys (above) are all it reads

    float acc[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][e] = 0.0f;
    // FP8: this thread's codes of its four keys (rows g and g + 8 of each m tile), chunks c and
    // c + 4 (dims 16c .. 16c + 15 and 64 + 16c ..), as 4-code words by k step.
    uint32_t codes[2][2][8];
    if constexpr (kFp8) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int rh = 0; rh < 2; ++rh) {
          const int key = warp * 32 + mt * 16 + g + rh * 8;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint4 w = *reinterpret_cast<const uint4*>(sm.codes[st] + key * kDim +
                                                            (((4 * h + c) ^ (key & 7)) * 16));
            codes[mt][rh][4 * h] = w.x;
            codes[mt][rh][4 * h + 1] = w.y;
            codes[mt][rh][4 * h + 2] = w.z;
            codes[mt][rh][4 * h + 3] = w.w;
          }
        }
    }
#pragma unroll
    for (int ks = 0; ks < 8; ++ks)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        uint32_t a[4];
        if constexpr (kFp8) {
          const uint2 k0 = E4m3x4ToScaledBf16(codes[mt][0][ks]);
          const uint2 k1 = E4m3x4ToScaledBf16(codes[mt][1][ks]);
          a[0] = k0.x;
          a[1] = k1.x;
          a[2] = k0.y;
          a[3] = k1.y;
        } else {
          const int m = lane >> 3;
          const int n = warp * 32 + mt * 16 + (m & 1) * 8 + (lane & 7);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                       : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                       : "r"(SmemAddr(sm.keys[st] + Swizzled(n, ks * 2 + (m >> 1)))));
        }
        Mma(acc[mt], a, bq[ks][0], bq[ks][1]);
      }

    // C: rows = keys (g, g + 8 of each m tile), columns = heads 2c, 2c + 1.
    const int64_t rel = pos - b * kBlock;  // the last visible key within the block
    const int lim = rel < kBlock ? static_cast<int>(rel) : kBlock;
    float m0 = -INFINITY, m1 = -INFINITY;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int jl = warp * 32 + mt * 16 + g + hf * 8;
        float v0 = acc[mt][hf * 2], v1 = acc[mt][hf * 2 + 1];
        if constexpr (kFp8) {
          v0 = v0 * kFp8ScoreScale * sm.scale[st][jl];
          v1 = v1 * kFp8ScoreScale * sm.scale[st][jl];
        }
        if (jl <= lim) {
          m0 = fmaxf(m0, v0);
          m1 = fmaxf(m1, v1);
        }
      }
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, o));
      m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, o));
    }
    const int parity = static_cast<int>((b - b_begin) & 1);
    if (g == 0) {
      sm.part[parity][warp][2 * c] = m0;
      sm.part[parity][warp][2 * c + 1] = m1;
    }
    // The one barrier per block: the warps' maxima are in, and (since each warp refills only the
    // stage it read a block ago, and part alternates) nothing written next is still being read.
    __syncthreads();
    if (tid < H) {
      float m = sm.part[parity][0][tid];
#pragma unroll
      for (int w = 1; w < kDecodeWarps; ++w) m = fmaxf(m, sm.part[parity][w][tid]);
      scores[(r * H + tid) * max_blocks + b] = m;
    }
    __syncwarp();  // the warp's reads of this stage are done before its next refill
  }
}

// ---- prefill tiles ----

constexpr int kPlanThreads = 1024;

__global__ void __launch_bounds__(kPlanThreads)
    PlanTilesKernel(PagedLayout L, int rows_per_tile, int64_t max_tiles, int4* tiles) {
  __shared__ int64_t scan[kPlanThreads];
  const int tid = threadIdx.x;
  int64_t base = 0;
  for (int64_t s0 = 0; s0 < L.seqs; s0 += kPlanThreads) {
    const int64_t s = s0 + tid;
    const int64_t n = s < L.seqs ? L.query_start[s + 1] - L.query_start[s] : 0;
    const int64_t c = n >= 2 ? (n + rows_per_tile - 1) / rows_per_tile : 0;
    scan[tid] = c;
    __syncthreads();
    for (int o = 1; o < kPlanThreads; o <<= 1) {
      const int64_t add = tid >= o ? scan[tid - o] : 0;
      __syncthreads();
      scan[tid] += add;
      __syncthreads();
    }
    const int64_t off = base + scan[tid] - c;
    for (int64_t i = 0; i < c; ++i) {
      const int64_t first = i * rows_per_tile;
      const int64_t cnt = n - first < rows_per_tile ? n - first : rows_per_tile;
      tiles[off + i] = make_int4(static_cast<int>(s), static_cast<int>(L.query_start[s] + first),
                                 static_cast<int>(cnt), 0);
    }
    base += scan[kPlanThreads - 1];
    __syncthreads();
  }
  for (int64_t t = base + tid; t < max_tiles; t += kPlanThreads) tiles[t] = make_int4(0, 0, 0, 0);
}

// ---- prefill scores ----

struct PrefillSmem {
  bf16 keys[2][kBlock * kDim];  // [key][dim], 16-byte chunks XOR-swizzled by key & 7
  float scale[2][kBlock];
};

template <int H, bool kFp8>
__global__ void __launch_bounds__(kPrefillThreads, 2)
    PrefillScoresKernel(const bf16* index_q, IndexKeys keys, PagedLayout L, int64_t max_blocks,
                        const int4* tiles, float* scores) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  PrefillSmem& sm = *reinterpret_cast<PrefillSmem*>(smem_raw);
  const int4 tile = tiles[blockIdx.x];
  if (tile.z == 0) return;
  const int64_t s = tile.x, r0 = tile.y;
  const int nq = tile.z * H;
  const int64_t pos0 = L.PositionOf(s, r0), pos_last = pos0 + tile.z - 1;
  const int64_t b_begin = int64_t{blockIdx.y} * kBlocksPerCta;
  const int64_t b_last = pos_last / kBlock + 1;
  const int64_t b_end = b_begin + kBlocksPerCta < b_last ? b_begin + kBlocksPerCta : b_last;
  if (b_begin >= b_end) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  // A fragments (queries) of this warp's m16 tile, all 8 k16 steps.
  const bf16* qbase = index_q + r0 * H * kDim;
  uint32_t a[8][4];
  {
    const int qa = warp * 16 + (lane >> 2), qb = qa + 8;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const int col = ks * 16 + 2 * (lane & 3);
      auto ld = [&](int qi, int c) -> uint32_t {
        const uint32_t pair =
            qi < nq ? *reinterpret_cast<const uint32_t*>(qbase + qi * kDim + c) : 0u;
        return kFp8 ? ScaledBf16x2(pair) : pair;
      };
      a[ks][0] = ld(qa, col);
      a[ks][1] = ld(qb, col);
      a[ks][2] = ld(qa, col + 8);
      a[ks][3] = ld(qb, col + 8);
    }
  }

  // Staging of key block b into buffer buf.
  uint4 raw[4];  // FP8: 4 x 16 codes per thread
  float raw_scale = 0.0f;
  // A warp copies 16 of the block's keys: each lane below 16 looks one of their slots up (the
  // lanes above repeat them) and every copy takes its key's slot by shuffle.
  auto fetch = [&](int64_t b, int buf) {
    if constexpr (kFp8) {
      // Copy i of lane l: key 4 warp + (l >> 3) + 32 i, 16 codes at chunk l & 7.
      const int64_t jm = b * kBlock + 4 * warp + (lane & 3) + 32 * ((lane >> 2) & 3);
      const bool mine_valid = jm <= pos_last;
      const int64_t mine = mine_valid ? L.Slot(s, jm) : 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int src_lane = (lane >> 3) | (i << 2), c = lane & 7;
        const int64_t slot = __shfl_sync(0xffffffffu, mine, src_lane);
        const bool valid = __shfl_sync(0xffffffffu, mine_valid, src_lane);
        raw[i] = valid ? __ldg(reinterpret_cast<const uint4*>(keys.fp8_codes + slot * kDim) + c)
                       : uint4{0, 0, 0, 0};
      }
      if (tid < kBlock) {
        const int64_t j = b * kBlock + tid;
        raw_scale = j <= pos_last ? __ldg(keys.fp8_scales + L.Slot(s, j)) : 0.0f;
      }
    } else {
      // Copy i of lane l: key 2 warp + (l >> 4) + 16 i, 8 dims at chunk l & 15.
      const int64_t jm = b * kBlock + 2 * warp + (lane & 1) + 16 * ((lane >> 1) & 7);
      const bool mine_valid = jm <= pos_last;
      const int64_t mine = mine_valid ? L.Slot(s, jm) : 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int src_lane = (lane >> 4) | (i << 1), n = 2 * warp + (lane >> 4) + 16 * i,
                  c = lane & 15;
        const int64_t slot = __shfl_sync(0xffffffffu, mine, src_lane);
        const bool valid = __shfl_sync(0xffffffffu, mine_valid, src_lane);
        CpAsync16(&sm.keys[buf][Swizzled(n, c)], keys.bf16_keys + slot * kDim + c * 8, valid);
      }
      CpAsyncCommit();
    }
  };
  auto store_fp8 = [&](int buf) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int id = tid + i * kPrefillThreads, n = id >> 3, c8 = id & 7;
      const uint2 d0 = E4m3x4ToScaledBf16(raw[i].x), d1 = E4m3x4ToScaledBf16(raw[i].y),
                  d2 = E4m3x4ToScaledBf16(raw[i].z), d3 = E4m3x4ToScaledBf16(raw[i].w);
      const uint4 lo = make_uint4(d0.x, d0.y, d1.x, d1.y), hi = make_uint4(d2.x, d2.y, d3.x, d3.y);
      *reinterpret_cast<uint4*>(&sm.keys[buf][Swizzled(n, 2 * c8)]) = lo;
      *reinterpret_cast<uint4*>(&sm.keys[buf][Swizzled(n, 2 * c8 + 1)]) = hi;
    }
    if (tid < kBlock) sm.scale[buf][tid] = raw_scale;
  };

  // One barrier per key block: past it, block b is staged and every warp is done with the
  // other buffer, which then receives block b + 1 while b is scored.
  fetch(b_begin, 0);
  for (int64_t b = b_begin; b < b_end; ++b) {
    const int buf = static_cast<int>(b - b_begin) & 1;
    if constexpr (kFp8)
      store_fp8(buf);
    else
      CpAsyncWait0();
    __syncthreads();
    if (b + 1 < b_end) fetch(b + 1, buf ^ 1);

    float acc[16][4];
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
    const bf16* kb = sm.keys[buf];
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
#pragma unroll
      for (int np = 0; np < 8; ++np) {
        const int m = lane >> 3;
        const int n = np * 16 + (m >> 1) * 8 + (lane & 7);
        const int c = ks * 2 + (m & 1);
        uint32_t b0, b1, b2, b3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                     : "r"(SmemAddr(kb + Swizzled(n, c))));
        Mma(acc[2 * np], a[ks], b0, b1);
        Mma(acc[2 * np + 1], a[ks], b2, b3);
      }
    }

    // Epilogue: each query's max over the block's keys (masked causally), written by the
    // quad's first lane.
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int qi = warp * 16 + (lane >> 2) + hf * 8;
      // The last visible key of this query within the block (negative: none).
      const int64_t rel = pos0 + qi / H - b * kBlock;
      const int lim = rel < kBlock ? static_cast<int>(rel) : kBlock;
      float m = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < 16; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int jl = nt * 8 + 2 * (lane & 3) + e;
          float v = acc[nt][hf * 2 + e];
          if constexpr (kFp8) v = v * kFp8ScoreScale * sm.scale[buf][jl];
          if (jl <= lim) m = fmaxf(m, v);
        }
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      if ((lane & 3) == 0 && qi < nq && rel >= 0) scores[(r0 * H + qi) * max_blocks + b] = m;
    }
  }
}

template <int H, bool kFp8, int S>
void LaunchDecodeHS(dim3 grid, const bf16* q, const IndexKeys& k, const PagedLayout& L, int64_t mb,
                    bool all, int bpc, float* sc, cudaStream_t st) {
  using Smem = typename std::conditional<kFp8, ScanSmem8<S>, ScanSmem16<S>>::type;
  AllowDynamicShared<DecodeScoresKernel<H, kFp8, S>>(sizeof(Smem));
  LaunchAfterPrior(DecodeScoresKernel<H, kFp8, S>, grid, kDecodeWarps * 32, sizeof(Smem), st, q, k,
                   L, mb, all, bpc, sc);
}

// Two stages for bf16 keys: one block in flight behind the one being scored. Three (96 KB of
// tiles, two thread blocks per SM instead of three) measured slower: 128K batch 32 scan 387 ->
// 479 us, 128K batch 1 chained MSA 17.1 -> 19.3 us. FP8 stages are half the size: three still
// fit four thread blocks per SM, and at batch 1 a thread block's two key blocks are in flight at
// once (chained MSA 16.2 -> 14.6 us).
template <int H, bool kFp8>
void LaunchDecodeH(dim3 grid, const bf16* q, const IndexKeys& k, const PagedLayout& L, int64_t mb,
                   bool all, int bpc, float* sc, cudaStream_t st) {
  LaunchDecodeHS<H, kFp8, kFp8 ? 3 : 2>(grid, q, k, L, mb, all, bpc, sc, st);
}

template <bool kFp8>
void LaunchDecode(int64_t heads, dim3 grid, const bf16* q, const IndexKeys& k, const PagedLayout& L,
                  int64_t mb, bool all, int bpc, float* sc, cudaStream_t st) {
  switch (heads) {
    case 1:
      LaunchDecodeH<1, kFp8>(grid, q, k, L, mb, all, bpc, sc, st);
      break;
    case 2:
      LaunchDecodeH<2, kFp8>(grid, q, k, L, mb, all, bpc, sc, st);
      break;
    case 4:
      LaunchDecodeH<4, kFp8>(grid, q, k, L, mb, all, bpc, sc, st);
      break;
    default:
      LaunchDecodeH<8, kFp8>(grid, q, k, L, mb, all, bpc, sc, st);
      break;
  }
}

template <int H, bool kFp8>
void LaunchPrefillH(dim3 grid, const bf16* q, const IndexKeys& k, const PagedLayout& L, int64_t mb,
                    const int4* tiles, float* sc, cudaStream_t st) {
  AllowDynamicShared<PrefillScoresKernel<H, kFp8>>(sizeof(PrefillSmem));
  PrefillScoresKernel<H, kFp8>
      <<<grid, kPrefillThreads, sizeof(PrefillSmem), st>>>(q, k, L, mb, tiles, sc);
}

template <bool kFp8>
void LaunchPrefill(int64_t heads, dim3 grid, const bf16* q, const IndexKeys& k,
                   const PagedLayout& L, int64_t mb, const int4* tiles, float* sc,
                   cudaStream_t st) {
  switch (heads) {
    case 1:
      LaunchPrefillH<1, kFp8>(grid, q, k, L, mb, tiles, sc, st);
      break;
    case 2:
      LaunchPrefillH<2, kFp8>(grid, q, k, L, mb, tiles, sc, st);
      break;
    case 4:
      LaunchPrefillH<4, kFp8>(grid, q, k, L, mb, tiles, sc, st);
      break;
    default:
      LaunchPrefillH<8, kFp8>(grid, q, k, L, mb, tiles, sc, st);
      break;
  }
}

}  // namespace

bool IndexScoresSupported(int64_t heads, int64_t head_dim, int64_t block_size) {
  return head_dim == kDim && block_size == kBlock &&
         (heads == 1 || heads == 2 || heads == 4 || heads == 8);
}

int64_t IndexPrefillTileBound(const PagedLayout& layout, int64_t heads) {
  const int64_t rows_per_tile = kQueryTile / heads;
  return (layout.rows + rows_per_tile - 1) / rows_per_tile + layout.seqs;
}

void IndexPlanPrefillTiles(const PagedLayout& layout, int64_t heads, int4* tiles,
                           cudaStream_t stream) {
  PlanTilesKernel<<<1, kPlanThreads, 0, stream>>>(layout, static_cast<int>(kQueryTile / heads),
                                                  IndexPrefillTileBound(layout, heads), tiles);
  CheckLaunch("IndexPlanPrefillTiles");
}

void IndexScoresDecode(const bf16* index_q, const IndexKeys& keys, const PagedLayout& layout,
                       int64_t heads, int64_t max_blocks, bool all_rows, float* scores,
                       cudaStream_t stream) {
  if (layout.rows <= 0 || max_blocks <= 0) return;
  // Runs of key blocks per thread block, from the sequence count and block-table width only:
  // about one wave of resident thread blocks where the work fills it, up to 8 blocks for many
  // sequences (a grid row per sequence: a mixed step's prefill rows launch nothing here).
  // Measured on the H100 at 128K (runs of 1, 2, 3, 4, 8): one sequence is fastest at runs of 3
  // with bf16 keys (14.4 us; 1024 runs of one block: 16.4 us), 32 sequences at runs of 8 (4 for
  // FP8, within 2%). FP8 keys count two thread blocks a SM although four fit (their stages are
  // half the size): with no key in L2, 128K batch 1 chained with the attention took 16.4 us at
  // runs of 4 against 16.7 at runs of 2 (17.3 without the early copies); an even split of the
  // row over 1, 2, 3 or 4 thread blocks a SM gained nothing.
  // M3_INDEX_SCAN_RUN overrides it (benchmarking).
  static const int forced = [] {
    const char* env = std::getenv("M3_INDEX_SCAN_RUN");
    return env ? std::atoi(env) : 0;
  }();
  const int64_t slots = (keys.fp8() ? 2 : 3) * int64_t{SmCount()};
  const int64_t want = forced > 0 ? forced : (layout.seqs * max_blocks + slots - 1) / slots;
  const int bpc = static_cast<int>(want < 1 ? 1 : want > 8 ? 8 : want);
  const dim3 grid(static_cast<unsigned>(layout.seqs), Blocks(max_blocks, bpc));
  if (keys.fp8())
    LaunchDecode<true>(heads, grid, index_q, keys, layout, max_blocks, all_rows, bpc, scores,
                       stream);
  else
    LaunchDecode<false>(heads, grid, index_q, keys, layout, max_blocks, all_rows, bpc, scores,
                        stream);
  CheckLaunch("IndexScoresDecode");
}

void IndexScoresPrefill(const bf16* index_q, const IndexKeys& keys, const PagedLayout& layout,
                        int64_t heads, int64_t max_blocks, const int4* tiles, int64_t num_tiles,
                        float* scores, cudaStream_t stream) {
  if (num_tiles <= 0 || max_blocks <= 0) return;
  const dim3 grid(static_cast<unsigned>(num_tiles), Blocks(max_blocks, kBlocksPerCta));
  if (keys.fp8())
    LaunchPrefill<true>(heads, grid, index_q, keys, layout, max_blocks, tiles, scores, stream);
  else
    LaunchPrefill<false>(heads, grid, index_q, keys, layout, max_blocks, tiles, scores, stream);
  CheckLaunch("IndexScoresPrefill");
}

}  // namespace m3::kernels::cuda
