// Shared-memory staged weight streaming for the block-scaled decode kernels (block_scaled_gemv.cu,
// the quantized MoE experts of moe_expert_gemv.cu): the block's 8 warps take the steps of its
// 16-row tiles in rounds of 8 (one step per warp, TileMma's stride), and the block copies each
// round's codes and scales into a ring of S shared-memory buffers with cp.async, S - 1 rounds
// ahead of the MMAs.
//
// Why: with the weights loaded into registers (TileMma), a warp waits for its loads, then
// converts and multiplies while none of its loads are in flight; at the 124 registers those
// kernels need, 16 warps per SM could not cover the DRAM latency: one MoE layer's NVFP4 gate_up
// read 85 MB in 100 us (18% of HBM) with the issue slots 28% busy and warps stalled on L1TEX
// (Nsight Compute, H200, 2026-11-28). Copies in flight cost no registers, so the ring keeps
// S - 1 rounds (tens of KB per block) streaming while the warps compute.
//
// Layout of a stage: codes [tile][16 rows][8 steps x 64 bytes + 64 padding] (the padding puts
// rows g and g + 1 of a quarter-warp's 16-byte reads in different banks), then scales
// [tile][16 rows][8 steps x scale bytes per step] (NVFP4 8, MXFP8 2). Eligible shapes
// (StagedFits): rows of scales a multiple of 16 bytes (NVFP4 k % 256 == 0, MXFP8 k % 512 == 0),
// 16-byte aligned tensors, the block's first step a multiple of 8.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/block_scaled_mma.cuh"

namespace m3::kernels::cuda {

constexpr int kStagedWarps = 8;
constexpr int kStagedRoundSteps = 8;  // one step per warp

// Scale bytes of a row per step (StepK elements).
M3_SCALED_HD constexpr int ScaleBytesPerStep(WeightKind kind) {
  return kind == WeightKind::kNvfp4 ? 8 : kind == WeightKind::kMxfp8 ? 2 : 0;
}

// Resident blocks of 8 warps per SM the staged kernels are compiled for (at most 128 registers
// per thread; two rings of 4 stages fit in shared memory).
constexpr int kStagedMinBlocks = 2;

template <WeightKind F, int NTILE, int S>
struct StagedLayout {
  static_assert(F != WeightKind::kBf16, "staged streaming is for block-scaled weights");
  static constexpr int kRowPitch = kStagedRoundSteps * 64 + 64;
  static constexpr int kScaleRow = kStagedRoundSteps * ScaleBytesPerStep(F);  // 64 or 16
  static constexpr int kCodeBytes = NTILE * 16 * kRowPitch;
  static constexpr int kStageBytes = kCodeBytes + NTILE * 16 * kScaleRow;
  static constexpr int kBytes = S * kStageBytes;
};

// Whether a weight of k columns at these pointers streams through the stages.
inline bool StagedFits(const ScaledRows& w, int64_t k) {
  if (w.kind == WeightKind::kBf16 || k <= 0) return false;
  const int64_t scale_row = w.kind == WeightKind::kNvfp4 ? k / 16 : k / 32;
  return k % 32 == 0 && scale_row % 16 == 0 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w.scales) % 16 == 0;
}

// Whether the staged kernels are used where they fit (M3_SCALED_STAGES=0: the register kernels,
// for the benchmark's side-by-side comparison). Read at each launch.
inline bool StagesEnabled() {
  const char* v = std::getenv("M3_SCALED_STAGES");
  return v == nullptr || v[0] != '0';
}

#ifdef __CUDACC__

// A tile of the block: its first row's codes and scales and how many of its 16 rows exist (rows
// past the end re-read the last one; their sums are discarded).
struct StagedTile {
  const uint8_t* code;
  const uint8_t* scale;
  int rows;
};

__device__ __forceinline__ void CpAsync16(void* dst, const void* src, int src_bytes) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;");
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// A thread's share of an item's copies, resolved once per item: per round it copies, for each
// tile, chunk (threadIdx.x & 31) of rows (threadIdx.x >> 5) and + 8 (16 bytes: step
// (threadIdx.x & 31) / 4 of the round), and threads below 16 x (scale row bytes / 16) one
// 16-byte chunk of a row's scales.
template <WeightKind F, int NTILE, int S>
struct CopyLanes {
  using L = StagedLayout<F, NTILE, S>;
  static constexpr int kScaleChunks = L::kScaleRow / 16;
  const uint8_t* code[NTILE][2];  // row start + the chunk's offset in a round
  const uint8_t* scale[NTILE];    // row start + the chunk's offset in a round (scale threads)
  int64_t s0, s1;

  __device__ __forceinline__ void Resolve(const StagedTile (&tiles)[NTILE], int64_t code_stride,
                                          int64_t scale_stride, int64_t first, int64_t last) {
    const int row = threadIdx.x >> 5, ch = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < NTILE; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j)
        code[i][j] = tiles[i].code + min(row + 8 * j, tiles[i].rows - 1) * code_stride + ch * 16;
      const int srow = static_cast<int>(threadIdx.x) / kScaleChunks;
      scale[i] = tiles[i].scale + min(srow, tiles[i].rows - 1) * scale_stride +
                 16 * (threadIdx.x % kScaleChunks);
    }
    s0 = first;
    s1 = last;
  }

  // Issues round r's copies into `stage`; steps at or past s1 are zeros.
  __device__ __forceinline__ void Issue(int64_t r, uint8_t* stage) const {
    const int row = threadIdx.x >> 5, ch = threadIdx.x & 31;
    const int64_t st0 = s0 + kStagedRoundSteps * r;
    const bool ok = st0 + (ch >> 2) < s1;
    const int64_t code_off = ok ? st0 * 64 : 0;
#pragma unroll
    for (int i = 0; i < NTILE; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        CpAsync16(stage + (i * 16 + row + 8 * j) * L::kRowPitch + ch * 16,
                  code[i][j] + code_off - (ok ? 0 : ch * 16), ok ? 16 : 0);
    if (threadIdx.x < 16 * kScaleChunks) {
      const int c = threadIdx.x % kScaleChunks;
      const int64_t valid =
          max(int64_t{0}, min(int64_t{kStagedRoundSteps}, s1 - st0)) * ScaleBytesPerStep(F);
      const int bytes = static_cast<int>(max(int64_t{0}, min(int64_t{16}, valid - 16 * c)));
      const int srow = static_cast<int>(threadIdx.x) / kScaleChunks;
#pragma unroll
      for (int i = 0; i < NTILE; ++i)
        CpAsync16(stage + L::kCodeBytes + (i * 16 + srow) * L::kScaleRow + 16 * c,
                  scale[i] + (bytes > 0 ? st0 * ScaleBytesPerStep(F) : -16 * c), bytes);
    }
  }
};

// One work item of a block: NTILE tiles over the steps [s0, s1) (s0 a multiple of 8 from the rows'
// start, s1 > s0), taken `passes` times (one pass per 8 input rows: the MMA's N).
template <int NTILE>
struct StagedItem {
  StagedTile tiles[NTILE];
  int64_t s0 = 0, s1 = 0;
  int passes = 1;
  __device__ int64_t rounds() const {
    return (s1 - s0 + kStagedRoundSteps - 1) / kStagedRoundSteps;
  }
};

// The block's items first, first + stride, ... (count of them; the same for every thread) with
// the weights streamed through the ring in `smem` (StagedLayout::kBytes), one pipeline across
// the items so the next item's rounds are in flight while one finishes:
//  describe(id) -> StagedItem<NTILE>: the item's tiles and steps;
//  inputs(id, item, pass, xrow): the input rows of a pass (null: zeros), lane group g's row n
//    at xrow[n];
//  finish(id, item, pass, acc): the pass's sums (acc[i][n]: C fragments of tile i, input group
//    n), called by every thread together (it may synchronize the block).
// Warp w takes step s0 + 8r + w of round r, as TileMma with stride 8.
template <WeightKind F, int NTILE, int NT, int S, bool H, typename Describe, typename Inputs,
          typename Finish>
__device__ __forceinline__ void StagedStream(int64_t first, int64_t stride, int64_t count,
                                             int64_t code_stride, int64_t scale_stride,
                                             uint8_t* smem, Describe describe, Inputs inputs,
                                             Finish finish) {
  using L = StagedLayout<F, NTILE, S>;
  if (count <= 0) return;
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  // The copy side runs S - 1 rounds ahead of the compute side, each with its own cursor.
  StagedItem<NTILE> cp = describe(first);
  CopyLanes<F, NTILE, S> lanes;
  lanes.Resolve(cp.tiles, code_stride, scale_stride, cp.s0, cp.s1);
  int64_t cp_item = 0;
  int cp_round = 0, cp_rounds = static_cast<int>(cp.rounds()), cp_pass = 0, cp_slot = 0;
  auto copy_next = [&]() {
    if (cp_item < count) {
      lanes.Issue(cp_round, smem + cp_slot * L::kStageBytes);
      cp_slot = cp_slot == S - 1 ? 0 : cp_slot + 1;
      if (++cp_round == cp_rounds) {
        cp_round = 0;
        if (++cp_pass == cp.passes) {
          cp_pass = 0;
          if (++cp_item < count) {
            cp = describe(first + cp_item * stride);
            lanes.Resolve(cp.tiles, code_stride, scale_stride, cp.s0, cp.s1);
            cp_rounds = static_cast<int>(cp.rounds());
          }
        }
      }
    }
    CpAsyncCommit();
  };
#pragma unroll
  for (int st = 0; st < S - 1; ++st) copy_next();

  StagedItem<NTILE> item = describe(first);
  int64_t item_i = 0;
  int round = 0, rounds = static_cast<int>(item.rounds()), pass = 0, slot = 0;
  const bf16* xrow[NT];
  inputs(first, item, 0, xrow);
  float acc[NTILE][NT][4] = {};
#pragma unroll 1
  while (item_i < count) {
    CpAsyncWait<S - 2>();
    __syncthreads();  // this round landed for every thread; the previous round's buffer is free
    copy_next();
    const uint8_t* stage = smem + slot * L::kStageBytes;
    slot = slot == S - 1 ? 0 : slot + 1;
    const int64_t step = item.s0 + kStagedRoundSteps * round + warp;
    if (step < item.s1) {
      uint4 q[NTILE][2];
      uint32_t sc[NTILE][2][2];
#pragma unroll
      for (int i = 0; i < NTILE; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = i * 16 + g + 8 * h;
          q[i][h] =
              *reinterpret_cast<const uint4*>(stage + row * L::kRowPitch + warp * 64 + t * 16);
          const uint8_t* srow = stage + L::kCodeBytes + row * L::kScaleRow;
          uint32_t bits;
          if constexpr (F == WeightKind::kNvfp4)
            bits = *reinterpret_cast<const uint16_t*>(srow + 8 * warp + 2 * t);
          else
            bits = srow[2 * warp + (t >> 1)];
          ScalesOfBits<F, H>(bits, sc[i][h]);
        }
      const int64_t kx = step * Kind<F>::kStepK + t * (Kind<F>::kStepK / 4);
      StepMma<F, NTILE, NT, H>(q, sc, xrow, kx, true, acc);
    }
    if (++round == rounds) {
      finish(first + item_i * stride, item, pass, acc);
#pragma unroll
      for (int i = 0; i < NTILE; ++i)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[i][n][c] = 0.0f;
      round = 0;
      if (++pass == item.passes) {
        pass = 0;
        if (++item_i < count) {
          item = describe(first + item_i * stride);
          rounds = static_cast<int>(item.rounds());
        }
      }
      if (item_i < count) inputs(first + item_i * stride, item, pass, xrow);
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // the ring may be reused
}

#endif  // __CUDACC__

}  // namespace m3::kernels::cuda
