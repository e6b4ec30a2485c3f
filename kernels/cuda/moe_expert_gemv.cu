// MoeExpertGemv: a one-block grouping kernel (counting sort of the picks by expert, stable), then
// two GEMV kernels over a grid of (output rows, groups), sized by the picks' upper bound on the
// groups; blocks beyond the step's group count exit at once. Each warp owns output rows and
// streams their weights with 16-byte loads, the group's input rows staged in shared memory in
// chunks of up to kChunk picks (later chunks re-read the block's weight rows from L2).
// Block-scaled experts (MoeExpertGemvScaled) on shapes the stages take (block_scaled_stages.cuh)
// run on persistent blocks instead: the GPU's resident blocks share the step's items (a group's
// 16 gate + 16 up rows, or 32 down rows) and stream their weights through one shared-memory
// pipeline; other shapes take the register kernels (a block per 16-row tile and group).
#include "kernels/cuda/moe_expert_gemv.cuh"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/cuda/bf16x8.cuh"
#include "kernels/cuda/block_scaled_stages.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kChunk = 4;  // picks per pass over a weight row
constexpr int kWarps = 8;  // per block; one output row (pair) per warp
constexpr int kThreads = 32 * kWarps;
constexpr int kGroupThreads = 1024;

size_t Aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

struct Scratch {
  int32_t *group_expert, *group_start, *num_groups, *pick_of_slot;
  bf16* act;
};

Scratch Carve(void* scratch, int64_t picks, const MoeGemvDims& d) {
  char* p = static_cast<char*>(scratch);
  Scratch s;
  s.group_expert = reinterpret_cast<int32_t*>(p);
  p += Aligned(d.experts * 4);
  s.group_start = reinterpret_cast<int32_t*>(p);
  p += Aligned((d.experts + 1) * 4);
  s.num_groups = reinterpret_cast<int32_t*>(p);
  p += Aligned(4);
  s.pick_of_slot = reinterpret_cast<int32_t*>(p);
  p += Aligned(picks * 4);
  s.act = reinterpret_cast<bf16*>(p);
  return s;
}

// A pick's group: its expert (an id out of range clamped rather than read beyond the weights),
// or -1 for a negative id (another rank's expert: no group, no slot).
__device__ __forceinline__ int GroupOf(int32_t id, int experts) {
  return id < 0 ? -1 : min(id, experts - 1);
}

// Stable counting sort of the picks by expert; groups are the non-empty experts ascending.
__global__ void GroupPicksKernel(const int32_t* ids, int picks, int experts, Scratch s,
                                 int32_t* slot_of_pick) {
  ChainedKernelStart();
  extern __shared__ int32_t sh[];  // count [experts], start [experts]
  int32_t* count = sh;
  int32_t* start = sh + experts;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < picks; p += blockDim.x) {
    const int e = GroupOf(ids[p], experts);
    if (e >= 0) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // exclusive scans of the counts and of the non-empty experts, by a warp
    // (one thread walking 128 experts took a few microseconds of every decode step's MoE layer)
    const int lane = static_cast<int>(threadIdx.x);
    int at = 0, g = 0;  // before this chunk of 32 experts
    for (int base = 0; base < experts; base += 32) {
      const int e = base + lane;
      const int c = e < experts ? count[e] : 0, nonempty = c > 0 ? 1 : 0;
      int x = c, y = nonempty;  // inclusive scans within the chunk
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int xs = __shfl_up_sync(0xffffffffu, x, o), ys = __shfl_up_sync(0xffffffffu, y, o);
        if (lane >= o) {
          x += xs;
          y += ys;
        }
      }
      if (e < experts) {
        start[e] = at + x - c;
        if (nonempty) {
          s.group_expert[g + y - 1] = e;
          s.group_start[g + y - 1] = at + x - c;
        }
      }
      at += __shfl_sync(0xffffffffu, x, 31);
      g += __shfl_sync(0xffffffffu, y, 31);
    }
    if (lane == 0) {
      s.group_start[g] = at;
      *s.num_groups = g;
    }
  }
  __syncthreads();
  for (int p = threadIdx.x; p < picks; p += blockDim.x) {
    const int e = GroupOf(ids[p], experts);
    if (e < 0) {
      slot_of_pick[p] = -1;
      continue;
    }
    int rank = 0;
    for (int q = 0; q < p; ++q) rank += GroupOf(ids[q], experts) == e;
    const int slot = start[e] + rank;
    slot_of_pick[p] = slot;
    s.pick_of_slot[slot] = p;
  }
}

// Stages the rows of slots [s0, s0 + mc) into shared memory: x rows of their picks' tokens
// (from_picks) or rows s0.. of `src` itself.
__device__ __forceinline__ void Stage(const bf16* src, int64_t width, const int32_t* pick_of_slot,
                                      int64_t topk, int s0, int mc, bool from_picks, uint4* dst) {
  const int64_t per_row = width / 8;
  for (int64_t i = threadIdx.x; i < mc * per_row; i += blockDim.x) {
    const int64_t r = i / per_row, c = i % per_row;
    const int64_t src_row = from_picks ? pick_of_slot[s0 + r] / topk : s0 + r;
    dst[i] = reinterpret_cast<const uint4*>(src + src_row * width)[c];
  }
}

// act[s0 + p, c] = SwiGLU-OAI(gate row . x_p, up row . x_p) for the MC staged rows.
template <int MC>
__device__ __forceinline__ void GateUpRows(const uint4* wg, const uint4* wu, const uint4* xs,
                                           int64_t n8, int s0, int64_t c, int64_t I, float alpha,
                                           float limit, bf16* act) {
  float acc[2][MC] = {};
  const uint4* const w[2] = {wg, wu};
  DotRows<2, MC>(w, xs, n8, acc);
#pragma unroll
  for (int p = 0; p < MC; ++p) {
    const float gs = fminf(WarpSum(acc[0][p]), limit);
    const float us = fminf(fmaxf(WarpSum(acc[1][p]), -limit), limit);
    if ((threadIdx.x & 31) == 0)
      act[(s0 + p) * I + c] = __float2bfloat16((us + 1.0f) * (gs / (1.0f + expf(-alpha * gs))));
  }
}

// ys[s0 + p, h] = down row . act_p for the MC staged rows.
template <int MC>
__device__ __forceinline__ void DownRows(const uint4* wd, const uint4* as, int64_t n8, int s0,
                                         int64_t h, int64_t H, float* ys) {
  float acc[1][MC] = {};
  const uint4* const w[1] = {wd};
  DotRows<1, MC>(w, as, n8, acc);
#pragma unroll
  for (int p = 0; p < MC; ++p) {
    const float v = WarpSum(acc[0][p]);
    if ((threadIdx.x & 31) == 0) ys[(s0 + p) * H + h] = v;
  }
}

// act[slot, c] = SwiGLU-OAI(gate row c . x, up row c . x) for the slots of group blockIdx.y.
__global__ void __launch_bounds__(kThreads)
    GateUpKernel(const bf16* x, const bf16* gate_up, int64_t H, int64_t I, int64_t topk,
                 float alpha, float limit, int chunk, Scratch s) {
  ChainedKernelStart();
  const int g = blockIdx.y;
  if (g >= *s.num_groups) return;
  extern __shared__ uint4 xs[];  // [chunk, H / 8]
  const int warp = threadIdx.x / 32;
  const int64_t e = s.group_expert[g], c = int64_t{blockIdx.x} * kWarps + warp;
  const int g0 = s.group_start[g], g1 = s.group_start[g + 1];
  const uint4* wg = reinterpret_cast<const uint4*>(gate_up + (e * 2 * I + c) * H);
  const uint4* wu = reinterpret_cast<const uint4*>(gate_up + (e * 2 * I + I + c) * H);
  const int64_t n8 = H / 8;
  for (int s0 = g0; s0 < g1; s0 += chunk) {
    const int mc = min(chunk, g1 - s0);
    __syncthreads();
    Stage(x, H, s.pick_of_slot, topk, s0, mc, true, xs);
    __syncthreads();
    if (c >= I) continue;
    static_assert(kChunk == 4, "the switch below covers 1 to kChunk rows");
    switch (mc) {
      case 1:
        GateUpRows<1>(wg, wu, xs, n8, s0, c, I, alpha, limit, s.act);
        break;
      case 2:
        GateUpRows<2>(wg, wu, xs, n8, s0, c, I, alpha, limit, s.act);
        break;
      case 3:
        GateUpRows<3>(wg, wu, xs, n8, s0, c, I, alpha, limit, s.act);
        break;
      default:
        GateUpRows<4>(wg, wu, xs, n8, s0, c, I, alpha, limit, s.act);
    }
  }
}

// ys[slot, h] = down row h . act[slot] for the slots of group blockIdx.y.
__global__ void __launch_bounds__(kThreads)
    DownKernel(const bf16* down, int64_t H, int64_t I, int chunk, Scratch s, float* ys) {
  ChainedKernelStart();
  const int g = blockIdx.y;
  if (g >= *s.num_groups) return;
  extern __shared__ uint4 as[];  // [chunk, I / 8]
  const int warp = threadIdx.x / 32;
  const int64_t e = s.group_expert[g], h = int64_t{blockIdx.x} * kWarps + warp;
  const int g0 = s.group_start[g], g1 = s.group_start[g + 1];
  const uint4* wd = reinterpret_cast<const uint4*>(down + (e * H + h) * I);
  const int64_t n8 = I / 8;
  for (int s0 = g0; s0 < g1; s0 += chunk) {
    const int mc = min(chunk, g1 - s0);
    __syncthreads();
    Stage(s.act, I, nullptr, 1, s0, mc, false, as);
    __syncthreads();
    if (h >= H) continue;
    switch (mc) {
      case 1:
        DownRows<1>(wd, as, n8, s0, h, H, ys);
        break;
      case 2:
        DownRows<2>(wd, as, n8, s0, h, H, ys);
        break;
      case 3:
        DownRows<3>(wd, as, n8, s0, h, H, ys);
        break;
      default:
        DownRows<4>(wd, as, n8, s0, h, H, ys);
    }
  }
}

// Block-scaled experts: a block per 16 P (gate_up) or 16 T (down) output rows of one group, 8
// warps splitting K into steps, partial sums through shared memory, picks in passes of 8 (the
// MMA's N).
constexpr int kScaledPicks = 8;

// act[slot, c0 + r] = SwiGLU-OAI(gate row, up row) for the group's slots: P tiles of 16 gate rows
// and the P tiles of their up rows per block (kGateUpPairs), each input fragment a warp loads
// serving all 2P.
template <WeightKind F, int P, bool Hf>
__global__ void __launch_bounds__(kThreads, 2)
    GateUpScaledKernel(const bf16* x, ScaledRows w, int64_t E, int64_t H, int64_t I, int64_t topk,
                       float alpha, float limit, Scratch s, bool prefetch) {
  ChainedKernelStart();
  const int grp = blockIdx.y;
  if (grp >= *s.num_groups) return;
  constexpr int kRows = 16 * P;
  constexpr int U = P == 1 ? 2 : 1;  // 8 16-byte weight loads per lane in flight
  __shared__ float red[kWarps][2 * P][16][kScaledPicks + 1];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t e = s.group_expert[grp], c0 = int64_t{blockIdx.x} * kRows;
  const int g0 = s.group_start[grp], g1 = s.group_start[grp + 1];
  const int64_t gate0 = e * 2 * I + c0, up0 = e * 2 * I + I + c0;
  TileLane tile[2 * P];  // gate tiles, then up tiles
#pragma unroll
  for (int i = 0; i < P; ++i) {
    tile[i] = TileOf<F>(w, gate0 + 16 * i, E * 2 * I, H);
    tile[P + i] = TileOf<F>(w, up0 + 16 * i, E * 2 * I, H);
  }
  const int64_t steps = StepsOf(F, H);
  for (int s0 = g0; s0 < g1; s0 += kScaledPicks) {
    const int slot = s0 + g;
    const bf16* xrow[1] = {slot < g1 ? x + (s.pick_of_slot[slot] / topk) * H : nullptr};
    float acc[2 * P][1][4] = {};
    TileMma<F, 2 * P, 1, U, Hf>(tile, xrow, warp, steps, kWarps, H, acc, prefetch);
    __syncthreads();  // the previous pass's sums are read
#pragma unroll
    for (int i = 0; i < 2 * P; ++i) {
      red[warp][i][g][2 * t] = acc[i][0][0];
      red[warp][i][g][2 * t + 1] = acc[i][0][1];
      red[warp][i][g + 8][2 * t] = acc[i][0][2];
      red[warp][i][g + 8][2 * t + 1] = acc[i][0][3];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kRows * kScaledPicks; i += kThreads) {
      const int r = i % kRows, c = i / kRows, tr = r / 16, rr = r % 16;
      if (s0 + c < g1 && c0 + r < I) {
        float gate = 0.0f, up = 0.0f;
#pragma unroll
        for (int q = 0; q < kWarps; ++q) {
          gate += red[q][tr][rr][c];
          up += red[q][P + tr][rr][c];
        }
        gate *= PostOf<F, Hf>() * (w.row_scale ? w.row_scale[gate0 + r] : 1.0f);
        up *= PostOf<F, Hf>() * (w.row_scale ? w.row_scale[up0 + r] : 1.0f);
        const float gs = fminf(gate, limit);
        const float us = fminf(fmaxf(up, -limit), limit);
        s.act[(s0 + c) * I + c0 + r] =
            __float2bfloat16((us + 1.0f) * (gs / (1.0f + expf(-alpha * gs))));
      }
    }
  }
}

// ys[slot, h0 + r] = down row . act[slot] for the group's slots: T tiles of 16 rows per block
// (kDownTiles), each act fragment a warp loads serving all T.
template <WeightKind F, int T, bool Hf>
__global__ void __launch_bounds__(kThreads, 2)
    DownScaledKernel(ScaledRows w, int64_t E, int64_t H, int64_t I, Scratch s, float* ys,
                     bool prefetch) {
  ChainedKernelStart();
  const int grp = blockIdx.y;
  if (grp >= *s.num_groups) return;
  constexpr int kRows = 16 * T;
  constexpr int U = T == 1 ? 4 : T == 2 ? 2 : 1;  // 8 16-byte weight loads per lane in flight
  __shared__ float red[kWarps][kRows][kScaledPicks + 1];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t e = s.group_expert[grp], h0 = int64_t{blockIdx.x} * kRows;
  const int g0 = s.group_start[grp], g1 = s.group_start[grp + 1];
  TileLane tile[T];
#pragma unroll
  for (int i = 0; i < T; ++i) tile[i] = TileOf<F>(w, e * H + min(h0 + 16 * i, H - 1), E * H, I);
  const int64_t steps = StepsOf(F, I);
  for (int s0 = g0; s0 < g1; s0 += kScaledPicks) {
    const int slot = s0 + g;
    const bf16* xrow[1] = {slot < g1 ? s.act + slot * I : nullptr};
    float acc[T][1][4] = {};
    TileMma<F, T, 1, U, Hf>(tile, xrow, warp, steps, kWarps, I, acc, prefetch);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < T; ++i) {
      red[warp][16 * i + g][2 * t] = acc[i][0][0];
      red[warp][16 * i + g][2 * t + 1] = acc[i][0][1];
      red[warp][16 * i + g + 8][2 * t] = acc[i][0][2];
      red[warp][16 * i + g + 8][2 * t + 1] = acc[i][0][3];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kRows * kScaledPicks; i += kThreads) {
      const int r = i % kRows, c = i / kRows;
      if (s0 + c < g1 && h0 + r < H) {
        float sum = 0.0f;
#pragma unroll
        for (int q = 0; q < kWarps; ++q) sum += red[q][r][c];
        ys[(s0 + c) * H + h0 + r] =
            sum * PostOf<F, Hf>() * (w.row_scale ? w.row_scale[e * H + h0 + r] : 1.0f);
      }
    }
  }
}

// The staged kernels (block_scaled_stages.cuh): persistent blocks streaming their share of the
// items through one shared-memory pipeline; an item is one group's gate and up tiles of 16 rows
// (gate_up) or 32 rows (down), all of its picks in passes of 8. NVFP4 takes the f16 form.
constexpr int kStagedTileRows = 32;  // two tiles of 16 rows per item
constexpr int kScaledStages = 4;
template <WeightKind F>
constexpr size_t kStagedBytes = StagedLayout<F, 2, kScaledStages>::kBytes;
template <WeightKind F>
constexpr bool kStagedHalf = F == WeightKind::kNvfp4;

// The items first, first + gridDim.x, ... < items a block streams.
__device__ __forceinline__ int64_t ItemsOfBlock(int64_t items) {
  const int64_t first = blockIdx.x;
  return items > first ? (items - first + gridDim.x - 1) / gridDim.x : 0;
}

// The tile of `rows` rows of k columns that starts at row r (rows past the end: the last one).
template <WeightKind F>
__device__ __forceinline__ StagedTile StagedTileAt(const ScaledRows& w, int64_t r, int64_t rows,
                                                   int64_t k) {
  r = min(r, rows - 1);
  return {static_cast<const uint8_t*>(w.data) + r * RowBytes(F, k),
          w.scales + r * Kind<F>::kScaleCols(k),
          static_cast<int>(max(int64_t{1}, min(int64_t{16}, rows - r)))};
}

// act[slot, c0 + r] = SwiGLU-OAI(gate row, up row) for every item (group, 16 rows c0..).
template <WeightKind F>
__global__ void __launch_bounds__(kThreads, kStagedMinBlocks)
    StagedGateUpKernel(const bf16* x, ScaledRows w, int64_t E, int64_t H, int64_t I, int64_t topk,
                       float alpha, float limit, Scratch s) {
  ChainedKernelStart();
  extern __shared__ __align__(16) uint8_t ring[];
  __shared__ float red[kWarps][2][16][kScaledPicks + 1];
  const int warp = threadIdx.x / 32, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  const int64_t per_group = (I + 15) / 16;
  using Item = StagedItem<2>;
  auto describe = [&](int64_t id) {
    const int64_t grp = id / per_group, c0 = id % per_group * 16, e = s.group_expert[grp];
    Item it;
    it.tiles[0] = StagedTileAt<F>(w, e * 2 * I + c0, E * 2 * I, H);
    it.tiles[1] = StagedTileAt<F>(w, e * 2 * I + I + c0, E * 2 * I, H);
    it.s0 = 0;
    it.s1 = StepsOf(F, H);
    it.passes = (s.group_start[grp + 1] - s.group_start[grp] + kScaledPicks - 1) / kScaledPicks;
    return it;
  };
  auto inputs = [&](int64_t id, const Item&, int pass, const bf16*(&xrow)[1]) {
    const int64_t grp = id / per_group;
    const int slot = s.group_start[grp] + pass * kScaledPicks + g;
    xrow[0] = slot < s.group_start[grp + 1] ? x + (s.pick_of_slot[slot] / topk) * H : nullptr;
  };
  auto finish = [&](int64_t id, const Item&, int pass, const float(&acc)[2][1][4]) {
    const int64_t grp = id / per_group, c0 = id % per_group * 16, e = s.group_expert[grp];
    const int s0 = s.group_start[grp] + pass * kScaledPicks, g1 = s.group_start[grp + 1];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      red[warp][i][g][2 * t] = acc[i][0][0];
      red[warp][i][g][2 * t + 1] = acc[i][0][1];
      red[warp][i][g + 8][2 * t] = acc[i][0][2];
      red[warp][i][g + 8][2 * t + 1] = acc[i][0][3];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * kScaledPicks; i += kThreads) {
      const int r = i % 16, c = i / 16;
      if (s0 + c >= g1 || c0 + r >= I) continue;
      float gate = 0.0f, up = 0.0f;
#pragma unroll
      for (int q = 0; q < kWarps; ++q) {
        gate += red[q][0][r][c];
        up += red[q][1][r][c];
      }
      const int64_t gate_row = e * 2 * I + c0 + r;
      gate *= PostOf<F, kStagedHalf<F>>() * (w.row_scale ? w.row_scale[gate_row] : 1.0f);
      up *= PostOf<F, kStagedHalf<F>>() * (w.row_scale ? w.row_scale[gate_row + I] : 1.0f);
      const float gs = fminf(gate, limit);
      const float us = fminf(fmaxf(up, -limit), limit);
      s.act[(s0 + c) * I + c0 + r] =
          __float2bfloat16((us + 1.0f) * (gs / (1.0f + expf(-alpha * gs))));
    }
  };
  StagedStream<F, 2, 1, kScaledStages, kStagedHalf<F>>(
      blockIdx.x, gridDim.x, ItemsOfBlock(*s.num_groups * per_group), RowBytes(F, H),
      Kind<F>::kScaleCols(H), ring, describe, inputs, finish);
}

// ys[slot, h0 + r] = down row . act[slot] for every item (group, 32 rows h0..).
template <WeightKind F>
__global__ void __launch_bounds__(kThreads, kStagedMinBlocks)
    StagedDownKernel(ScaledRows w, int64_t E, int64_t H, int64_t I, Scratch s, float* ys) {
  ChainedKernelStart();
  extern __shared__ __align__(16) uint8_t ring[];
  __shared__ float red[kWarps][kStagedTileRows][kScaledPicks + 1];
  const int warp = threadIdx.x / 32, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  const int64_t per_group = (H + kStagedTileRows - 1) / kStagedTileRows;
  using Item = StagedItem<2>;
  auto describe = [&](int64_t id) {
    const int64_t grp = id / per_group, h0 = id % per_group * kStagedTileRows;
    const int64_t e = s.group_expert[grp];
    Item it;
    it.tiles[0] = StagedTileAt<F>(w, e * H + min(h0, H - 1), E * H, I);
    it.tiles[1] = StagedTileAt<F>(w, e * H + min(h0 + 16, H - 1), E * H, I);
    it.s0 = 0;
    it.s1 = StepsOf(F, I);
    it.passes = (s.group_start[grp + 1] - s.group_start[grp] + kScaledPicks - 1) / kScaledPicks;
    return it;
  };
  auto inputs = [&](int64_t id, const Item&, int pass, const bf16*(&xrow)[1]) {
    const int64_t grp = id / per_group;
    const int slot = s.group_start[grp] + pass * kScaledPicks + g;
    xrow[0] = slot < s.group_start[grp + 1] ? s.act + slot * I : nullptr;
  };
  auto finish = [&](int64_t id, const Item&, int pass, const float(&acc)[2][1][4]) {
    const int64_t grp = id / per_group, h0 = id % per_group * kStagedTileRows;
    const int64_t e = s.group_expert[grp];
    const int s0 = s.group_start[grp] + pass * kScaledPicks, g1 = s.group_start[grp + 1];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      red[warp][16 * i + g][2 * t] = acc[i][0][0];
      red[warp][16 * i + g][2 * t + 1] = acc[i][0][1];
      red[warp][16 * i + g + 8][2 * t] = acc[i][0][2];
      red[warp][16 * i + g + 8][2 * t + 1] = acc[i][0][3];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kStagedTileRows * kScaledPicks; i += kThreads) {
      const int r = i % kStagedTileRows, c = i / kStagedTileRows;
      if (s0 + c >= g1 || h0 + r >= H) continue;
      float sum = 0.0f;
#pragma unroll
      for (int q = 0; q < kWarps; ++q) sum += red[q][r][c];
      ys[(s0 + c) * H + h0 + r] =
          sum * PostOf<F, kStagedHalf<F>>() * (w.row_scale ? w.row_scale[e * H + h0 + r] : 1.0f);
    }
  };
  StagedStream<F, 2, 1, kScaledStages, kStagedHalf<F>>(
      blockIdx.x, gridDim.x, ItemsOfBlock(*s.num_groups * per_group), RowBytes(F, I),
      Kind<F>::kScaleCols(I), ring, describe, inputs, finish);
}

// Gate / up tile pairs per gate_up block (M3_MOE_SCALED_GATEUP_PAIRS=1|2 overrides). 1: with 2
// pairs, 2 down tiles and the L2 prefetch one MoE layer's decode took 220 / 1148 us (MXFP8, batch
// 1 / 8) against 102.5 / 621 us in this geometry (H200, 2026-11-28).
constexpr int kGateUpPairs = 1;
int GateUpPairs() {
  const char* v = std::getenv("M3_MOE_SCALED_GATEUP_PAIRS");
  if (v == nullptr) return kGateUpPairs;
  const int p = std::atoi(v);
  return p == 1 || p == 2 ? p : kGateUpPairs;
}

// Down tiles per block (M3_MOE_SCALED_DOWN_TILES=1|2|4 overrides; 1, measured as above).
constexpr int kDownTiles = 1;
int DownTiles() {
  const char* v = std::getenv("M3_MOE_SCALED_DOWN_TILES");
  if (v == nullptr) return kDownTiles;
  const int t = std::atoi(v);
  return t == 1 || t == 2 || t == 4 ? t : kDownTiles;
}

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("MoeExpertGemv: ") + what + ": " + cudaGetErrorString(e));
}

// Dynamic shared memory beyond the default 48 KiB needs the kernel's opt-in.
template <typename Kernel>
void AllowSharedBytes(Kernel k, size_t bytes) {
  if (bytes > 48 * 1024)
    Check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(bytes)),
          "shared memory opt-in");
}

}  // namespace

bool MoeExpertGemvFits(int64_t picks, const MoeGemvDims& d) {
  return picks > 0 && picks <= kMoeGemvMaxPicks && d.experts > 0 && d.experts <= 1024 &&
         d.hidden % 8 == 0 && d.inter % 8 == 0 && d.hidden * 2 * kChunk <= 200 * 1024 &&
         d.inter * 2 * kChunk <= 200 * 1024;
}

size_t MoeExpertGemvScratchBytes(int64_t picks, const MoeGemvDims& d) {
  return Aligned(d.experts * 4) + Aligned((d.experts + 1) * 4) + Aligned(4) + Aligned(picks * 4) +
         Aligned(picks * d.inter * 2);
}

bool MoeExpertGemvScaledFits(int64_t picks, const MoeGemvDims& d) {
  return picks > 0 && picks <= kMoeGemvScaledMaxPicks && d.experts > 0 && d.experts <= 1024 &&
         d.hidden % 32 == 0 && d.inter % 32 == 0;
}

namespace {
// Whether NVFP4 experts take the f16 form (MXFP8 and bf16 have only the bf16 one): only with
// M3_MOE_NVFP4_HALF=1. The bf16 form in the single-tile geometry is the fastest measured (129.4
// us at batch 1 on an H200, 2026-11-28); the f16 form there is not measured yet.
template <WeightKind F>
bool HalfFormOf() {
  const char* v = std::getenv("M3_MOE_NVFP4_HALF");
  return F == WeightKind::kNvfp4 && v != nullptr && v[0] == '1';
}

template <WeightKind F, int P>
void LaunchGateUpPairs(const bf16* x, const ScaledRows& w, const MoeGemvDims& d, const Scratch& s,
                       unsigned max_groups, cudaStream_t stream) {
  auto kernel = HalfFormOf<F>() ? GateUpScaledKernel<F, P, F == WeightKind::kNvfp4>
                                : GateUpScaledKernel<F, P, false>;
  LaunchAfterPrior(kernel, dim3(Blocks(d.inter, 16 * P), max_groups), kThreads, 0, stream, x, w,
                   d.experts, d.hidden, d.inter, d.topk, d.alpha, d.limit, s, ScaledPrefetch());
}
// Resident blocks of a staged kernel on the whole GPU (its grid: persistent blocks).
template <typename Kernel>
unsigned StagedGrid(Kernel kernel, size_t smem, int64_t items_bound) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem) !=
          cudaSuccess ||
      per_sm <= 0) {
    cudaGetLastError();
    per_sm = 1;
  }
  return static_cast<unsigned>(std::min<int64_t>(items_bound, int64_t{per_sm} * SmCount()));
}

template <WeightKind F>
void LaunchGateUpScaled(const bf16* x, const ScaledRows& w, const MoeGemvDims& d, const Scratch& s,
                        unsigned max_groups, cudaStream_t stream) {
  if constexpr (F != WeightKind::kBf16) {
    if (StagesEnabled() && StagedFits(w, d.hidden)) {
      auto kernel = StagedGateUpKernel<F>;
      AllowSharedBytes(kernel, kStagedBytes<F>);  // per launch: the opt-in is per device
      const unsigned grid =
          StagedGrid(kernel, kStagedBytes<F>, int64_t{max_groups} * ((d.inter + 15) / 16));
      LaunchAfterPrior(kernel, grid, kThreads, kStagedBytes<F>, stream, x, w, d.experts, d.hidden,
                       d.inter, d.topk, d.alpha, d.limit, s);
      return;
    }
  }
  if (GateUpPairs() == 2 && d.inter % 32 == 0)
    return LaunchGateUpPairs<F, 2>(x, w, d, s, max_groups, stream);
  LaunchGateUpPairs<F, 1>(x, w, d, s, max_groups, stream);
}
template <WeightKind F, int T>
void LaunchDownTiles(const ScaledRows& w, const MoeGemvDims& d, const Scratch& s,
                     unsigned max_groups, float* ys, cudaStream_t stream) {
  auto kernel = HalfFormOf<F>() ? DownScaledKernel<F, T, F == WeightKind::kNvfp4>
                                : DownScaledKernel<F, T, false>;
  LaunchAfterPrior(kernel, dim3(Blocks(d.hidden, 16 * T), max_groups), kThreads, 0, stream, w,
                   d.experts, d.hidden, d.inter, s, ys, ScaledPrefetch());
}
template <WeightKind F>
void LaunchDownScaled(const ScaledRows& w, const MoeGemvDims& d, const Scratch& s,
                      unsigned max_groups, float* ys, cudaStream_t stream) {
  if constexpr (F != WeightKind::kBf16) {
    if (StagesEnabled() && StagedFits(w, d.inter)) {
      auto kernel = StagedDownKernel<F>;
      AllowSharedBytes(kernel, kStagedBytes<F>);
      const unsigned grid =
          StagedGrid(kernel, kStagedBytes<F>,
                     int64_t{max_groups} * ((d.hidden + kStagedTileRows - 1) / kStagedTileRows));
      LaunchAfterPrior(kernel, grid, kThreads, kStagedBytes<F>, stream, w, d.experts, d.hidden,
                       d.inter, s, ys);
      return;
    }
  }
  switch (DownTiles()) {
    case 4:
      return LaunchDownTiles<F, 4>(w, d, s, max_groups, ys, stream);
    case 2:
      return LaunchDownTiles<F, 2>(w, d, s, max_groups, ys, stream);
    default:
      return LaunchDownTiles<F, 1>(w, d, s, max_groups, ys, stream);
  }
}
}  // namespace

void MoeExpertGemvScaled(const bf16* x, int64_t rows, const int32_t* ids, const ScaledRows& gate_up,
                         const ScaledRows& down, const MoeGemvDims& d, void* scratch, float* ys,
                         int32_t* slot_of_pick, cudaStream_t stream) {
  const int64_t picks = rows * d.topk;
  if (!MoeExpertGemvScaledFits(picks, d))
    throw std::runtime_error("MoeExpertGemvScaled: batch does not fit");
  const Scratch s = Carve(scratch, picks, d);
  LaunchAfterPrior(GroupPicksKernel, 1, kGroupThreads, 2 * d.experts * sizeof(int32_t), stream, ids,
                   static_cast<int>(picks), static_cast<int>(d.experts), s, slot_of_pick);
  CheckLaunch("MoeExpertGemvScaled grouping");
  const unsigned max_groups = static_cast<unsigned>(picks < d.experts ? picks : d.experts);
  switch (gate_up.kind) {
    case WeightKind::kMxfp8:
      LaunchGateUpScaled<WeightKind::kMxfp8>(x, gate_up, d, s, max_groups, stream);
      break;
    case WeightKind::kNvfp4:
      LaunchGateUpScaled<WeightKind::kNvfp4>(x, gate_up, d, s, max_groups, stream);
      break;
    default:
      LaunchGateUpScaled<WeightKind::kBf16>(x, gate_up, d, s, max_groups, stream);
  }
  CheckLaunch("MoeExpertGemvScaled gate_up");
  switch (down.kind) {
    case WeightKind::kMxfp8:
      LaunchDownScaled<WeightKind::kMxfp8>(down, d, s, max_groups, ys, stream);
      break;
    case WeightKind::kNvfp4:
      LaunchDownScaled<WeightKind::kNvfp4>(down, d, s, max_groups, ys, stream);
      break;
    default:
      LaunchDownScaled<WeightKind::kBf16>(down, d, s, max_groups, ys, stream);
  }
  CheckLaunch("MoeExpertGemvScaled down");
}

void MoeExpertGemv(const bf16* x, int64_t rows, const int32_t* ids, const bf16* gate_up,
                   const bf16* down, const MoeGemvDims& d, void* scratch, float* ys,
                   int32_t* slot_of_pick, cudaStream_t stream) {
  const int64_t picks = rows * d.topk;
  if (!MoeExpertGemvFits(picks, d)) throw std::runtime_error("MoeExpertGemv: batch does not fit");
  const Scratch s = Carve(scratch, picks, d);
  LaunchAfterPrior(GroupPicksKernel, 1, kGroupThreads, 2 * d.experts * sizeof(int32_t), stream, ids,
                   static_cast<int>(picks), static_cast<int>(d.experts), s, slot_of_pick);
  CheckLaunch("MoeExpertGemv grouping");
  const unsigned max_groups = static_cast<unsigned>(picks < d.experts ? picks : d.experts);
  // Routing picks an expert at most once per token, so a group rarely holds more picks than the
  // step has rows: stage that many per pass (less shared memory, more resident blocks at batch
  // 1); a larger group (repeated ids) takes more passes.
  const int chunk = static_cast<int>(rows < kChunk ? rows : kChunk);
  const size_t gu_smem = chunk * d.hidden * 2, down_smem = chunk * d.inter * 2;
  AllowSharedBytes(GateUpKernel, gu_smem);
  AllowSharedBytes(DownKernel, down_smem);
  LaunchAfterPrior(GateUpKernel, dim3(Blocks(d.inter, kWarps), max_groups), kThreads, gu_smem,
                   stream, x, gate_up, d.hidden, d.inter, d.topk, d.alpha, d.limit, chunk, s);
  CheckLaunch("MoeExpertGemv gate_up");
  LaunchAfterPrior(DownKernel, dim3(Blocks(d.hidden, kWarps), max_groups), kThreads, down_smem,
                   stream, down, d.hidden, d.inter, chunk, s, ys);
  CheckLaunch("MoeExpertGemv down");
}

}  // namespace m3::kernels::cuda
