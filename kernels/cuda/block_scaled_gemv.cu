// BlockScaledGemv. One input group (decode, 1-8 rows) on shapes the stages take
// (block_scaled_stages.cuh: NVFP4 k % 256 == 0, MXFP8 k % 512 == 0, aligned tensors): persistent
// blocks stream their share of the items (2 tiles of 16 rows times one K split of whole rounds
// of 8 steps) through a shared-memory ring, the split count chosen so that no block streams
// many more rounds than the others. Otherwise the register kernels: a block of 8 warps per
// T x 16 weight rows (T MMA tiles) and K range; its warps take the range's steps in turn and sum
// through shared memory. The K range is the whole row unless the row tiles alone would leave the
// GPU's resident blocks partly idle (few rows, or a last wave of blocks much smaller than the
// others): then the grid also splits K and a second kernel adds the splits' f32 partial sums.
// Input rows go in groups of 8 (the MMA's N): 1 to 8 rows cost one group, up to 64 rows eight,
// each weight tile dequantized once for all of them. With one group a warp takes T = 4 tiles per
// step (kGemvTiles): each input fragment it loads serves 4 tiles, so the inputs' L1 / L2 traffic
// per weight byte drops 4x. M3_BLOCK_SCALED_GEMV_TILES=1|2|4 picks T for one group, and
// M3_SCALED_STAGES=0 the register kernels where the stages fit (benchmarks, tests).
#include "kernels/cuda/block_scaled_gemv.cuh"

#include "kernels/cuda/block_scaled_stages.cuh"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace m3::kernels::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxSplits = 16;

// Weight steps whose loads are in flight together: more with one input group, where each
// step's arithmetic is short; fewer with more groups (registers).
template <int NT>
__host__ __device__ constexpr int UnrollOf() {
  return NT == 1 ? 4 : NT == 2 ? 2 : 1;
}

// Tiles per warp step with one input group, the environment's override else by format: measured
// on an H200 (2026-11-28, m3-bench-quant-gemm --quick), 4 tiles in the f16 form take NVFP4 at
// batch 8 from 51.3 to 32.4 us (qkv) and 105.9 to 73.8 us (dense gate_up), at batch 1 within
// 3%; MXFP8 is 10-20% slower with 4 tiles than with 1 (qkv 34.5 against 30.8 us).
int TilesFor(int groups, WeightKind kind) {
  if (groups != 1) return 1;
  const int by_format = kind == WeightKind::kNvfp4 ? 4 : 1;
  const char* v = std::getenv("M3_BLOCK_SCALED_GEMV_TILES");
  if (v == nullptr) return by_format;
  const int t = std::atoi(v);
  return t == 1 || t == 2 || t == 4 ? t : by_format;
}

// The block's result: the warps' sums of rows row0.. added through shared memory, then stored as
// y (scaled) or as this K split's partial sums.
template <WeightKind F, int NT, int T, bool H, typename Y>
__device__ __forceinline__ void SumWarpsAndStore(const float (&acc)[T][NT][4],
                                                 float (&red)[kWarps][16 * T][NT * 8 + 1],
                                                 int64_t row0, int64_t m, int64_t n,
                                                 const float* row_scale, Y* y, float* partial,
                                                 int64_t split) {
  constexpr int kCols = NT * 8;
  constexpr int kRows = 16 * T;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < T; ++i)
#pragma unroll
    for (int c = 0; c < NT; ++c) {
      red[warp][16 * i + g][c * 8 + 2 * t] = acc[i][c][0];
      red[warp][16 * i + g][c * 8 + 2 * t + 1] = acc[i][c][1];
      red[warp][16 * i + g + 8][c * 8 + 2 * t] = acc[i][c][2];
      red[warp][16 * i + g + 8][c * 8 + 2 * t + 1] = acc[i][c][3];
    }
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * kCols; i += kThreads) {
    const int r = i % kRows, c = i / kRows;  // consecutive threads: consecutive outputs of a row
    const int64_t row = row0 + r;
    if (row >= n || c >= m) continue;
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < kWarps; ++q) sum += red[q][r][c];
    if (partial != nullptr) {
      partial[(split * m + c) * n + row] = sum;
    } else {
      const float f = PostOf<F, H>() * (row_scale ? row_scale[row] : 1.0f);
      Store(y, c * n + row, sum * f);
    }
  }
}

template <WeightKind F, int NT, int T, bool H, typename Y>
__global__ void __launch_bounds__(kThreads, 2)
    GemvKernel(const bf16* x, int64_t m, ScaledRows w, int64_t n, int64_t k,
               int64_t steps_per_split, Y* y, float* partial, bool prefetch) {
  ChainedKernelStart();
  constexpr int kRows = 16 * T;
  constexpr int U = T == 1 ? UnrollOf<NT>() : T == 2 ? 2 : 1;  // 8 16-byte loads per lane
  __shared__ float red[kWarps][kRows][NT * 8 + 1];
  const int warp = threadIdx.x / 32, g = (threadIdx.x & 31) >> 2;
  const int64_t row0 = int64_t{blockIdx.x} * kRows;
  TileLane tile[T];
#pragma unroll
  for (int i = 0; i < T; ++i) tile[i] = TileOf<F>(w, row0 + 16 * i, n, k);
  const bf16* xrow[NT];
#pragma unroll
  for (int c = 0; c < NT; ++c) {
    const int64_t tok = c * 8 + g;
    xrow[c] = tok < m ? x + tok * k : nullptr;
  }
  float acc[T][NT][4] = {};
  const int64_t steps = StepsOf(F, k);
  const int64_t s0 = int64_t{blockIdx.y} * steps_per_split;
  const int64_t s1 = min(steps, s0 + steps_per_split);
  TileMma<F, T, NT, U, H>(tile, xrow, s0 + warp, s1, kWarps, k, acc, prefetch);
  SumWarpsAndStore<F, NT, T, H>(acc, red, row0, m, n, w.row_scale, y, partial, blockIdx.y);
}

// One input group through the shared-memory stages (block_scaled_stages.cuh): persistent blocks,
// each streaming its share of the items (kStagedTiles tiles of 16 rows times one K split of whole
// rounds of 8 steps) through one pipeline.
constexpr int kStagedTiles = 2;
constexpr int kStages = 4;
template <WeightKind F>
using GemvStages = StagedLayout<F, kStagedTiles, kStages>;

template <WeightKind F, bool H, typename Y>
__global__ void __launch_bounds__(kThreads, kStagedMinBlocks)
    StagedGemvKernel(const bf16* x, int64_t m, ScaledRows w, int64_t n, int64_t k, int64_t splits,
                     int64_t steps_per_split, Y* y, float* partial) {
  ChainedKernelStart();
  extern __shared__ __align__(16) uint8_t ring[];
  __shared__ float red[kWarps][16 * kStagedTiles][9];
  constexpr int64_t kRows = 16 * kStagedTiles;
  const int g = (threadIdx.x & 31) >> 2;
  const int64_t items = (n + kRows - 1) / kRows * splits, first = blockIdx.x, stride = gridDim.x;
  const int64_t count = items > first ? (items - first + stride - 1) / stride : 0;
  const int64_t code_stride = RowBytes(F, k), scale_stride = Kind<F>::kScaleCols(k);
  const int64_t steps = StepsOf(F, k);
  using Item = StagedItem<kStagedTiles>;
  auto describe = [&](int64_t id) {
    Item it;
    const int64_t row0 = id / splits * kRows, split = id % splits;
#pragma unroll
    for (int i = 0; i < kStagedTiles; ++i) {
      const int64_t r = min(row0 + 16 * i, n - 1);
      it.tiles[i] = {static_cast<const uint8_t*>(w.data) + r * code_stride,
                     w.scales + r * scale_stride,
                     static_cast<int>(max(int64_t{1}, min(int64_t{16}, n - (row0 + 16 * i))))};
    }
    it.s0 = split * steps_per_split;
    it.s1 = min(steps, it.s0 + steps_per_split);
    return it;
  };
  auto inputs = [&](int64_t, const Item&, int, const bf16*(&xrow)[1]) {
    xrow[0] = g < m ? x + g * k : nullptr;
  };
  auto finish = [&](int64_t id, const Item&, int, const float(&acc)[kStagedTiles][1][4]) {
    SumWarpsAndStore<F, 1, kStagedTiles, H>(acc, red, id / splits * kRows, m, n, w.row_scale, y,
                                            splits > 1 ? partial : nullptr, id % splits);
  };
  StagedStream<F, kStagedTiles, 1, kStages, H>(first, stride, count, code_stride, scale_stride,
                                               ring, describe, inputs, finish);
}

template <typename Y>
__global__ void SumSplitsKernel(const float* partial, int64_t splits, int64_t m, int64_t n,
                                const float* row_scale, float post, Y* y) {
  ChainedKernelStart();
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= m * n) return;
  float sum = 0.0f;
  for (int64_t s = 0; s < splits; ++s) sum += partial[s * m * n + i];
  const int64_t row = i % n;
  Store(y, i, sum * post * (row_scale ? row_scale[row] : 1.0f));
}

int GroupsOf(int64_t m) {
  const int64_t g = (m + 7) / 8;
  return g <= 1 ? 1 : g <= 2 ? 2 : g <= 4 ? 4 : 8;
}

// Resident blocks of the kernel on the whole GPU (the bf16-output instantiation stands for both:
// the plan must not depend on the output type, so the workspace query agrees with the launch).
template <WeightKind F, int NT, int T, bool H>
int ResidentBlocks() {
  static int per_sm = [] {
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, GemvKernel<F, NT, T, H, bf16>, kThreads,
                                                      0) != cudaSuccess ||
        b <= 0) {
      cudaGetLastError();
      b = 2;
    }
    return b;
  }();
  return per_sm * SmCount();
}

template <WeightKind F, bool H>
int ResidentBlocksOne(int tiles) {
  return tiles == 4   ? ResidentBlocks<F, 1, 4, H>()
         : tiles == 2 ? ResidentBlocks<F, 1, 2, H>()
                      : ResidentBlocks<F, 1, 1, H>();
}

template <WeightKind F>
int ResidentBlocksOf(int groups, int tiles) {
  switch (groups) {
    case 1:
      if constexpr (F == WeightKind::kNvfp4)
        if (NvHalfForm()) return ResidentBlocksOne<F, true>(tiles);
      return ResidentBlocksOne<F, false>(tiles);
    case 2:
      return ResidentBlocks<F, 2, 1, false>();
    case 4:
      return ResidentBlocks<F, 4, 1, false>();
    default:
      return ResidentBlocks<F, 8, 1, false>();
  }
}

// The K splits. One tile per block (the former geometry): the smallest count whose waves of
// blocks fill the resident slots best. Several: the count that minimizes waves of blocks times
// rounds of steps per warp (a block's latency-bound time) over the share of resident slots kept
// busy, each further split costing 3 % (the partial sums and their reduction); with few blocks
// (a 128-row weight is 2 blocks) filling the slots outweighs the splits' cost. Each warp keeps at
// least one step; the partial sums take at most kMaxPartialBytes.
constexpr size_t kMaxPartialBytes = size_t{64} << 20;
int64_t PlanSplits(int64_t m, int64_t n, int64_t k, WeightKind kind, int tiles_per_block) {
  const int64_t tiles = (n + 16 * tiles_per_block - 1) / (16 * tiles_per_block);
  const int64_t steps = StepsOf(kind, k);
  const int capacity = kind == WeightKind::kMxfp8
                           ? ResidentBlocksOf<WeightKind::kMxfp8>(GroupsOf(m), tiles_per_block)
                           : ResidentBlocksOf<WeightKind::kNvfp4>(GroupsOf(m), tiles_per_block);
  const int64_t most = std::min<int64_t>(kMaxSplits, std::max<int64_t>(1, steps / kWarps));
  int64_t best = 1;
  double best_score = -1e30;
  for (int64_t s = 1; s <= most; ++s) {
    if (s > 1 && static_cast<size_t>(s * m * n) * 4 > kMaxPartialBytes) break;
    const int64_t blocks = tiles * s;
    const int64_t waves = (blocks + capacity - 1) / capacity;
    double score;
    if (tiles_per_block == 1) {
      const double fill = static_cast<double>(blocks) / static_cast<double>(waves * capacity);
      score = fill - 0.02 * static_cast<double>(s);  // each split costs a little
    } else {
      const int64_t per = (steps + s - 1) / s, rounds = (per + kWarps - 1) / kWarps;
      const double busy =  // the share of resident slots a grid smaller than one wave keeps busy
          std::min(1.0, static_cast<double>(blocks) / static_cast<double>(capacity));
      score =
          -static_cast<double>(waves * rounds) * (1.0 + 0.03 * static_cast<double>(s - 1)) / busy;
    }
    if (score > best_score + 1e-9) {
      best_score = score;
      best = s;
    }
  }
  return best;
}

template <WeightKind F, int NT, int T, bool H, typename Y>
void Launch(const bf16* x, int64_t m, const ScaledRows& w, int64_t n, int64_t k, Y* y,
            void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const int64_t blocks = (n + 16 * T - 1) / (16 * T), steps = StepsOf(F, k);
  int64_t splits = PlanSplits(m, n, k, F, T);
  if (workspace == nullptr || workspace_bytes < static_cast<size_t>(splits * m * n) * 4)
    splits = 1;  // a smaller workspace than asked for: one pass over K
  const int64_t per = (steps + splits - 1) / splits;
  float* partial = splits > 1 ? static_cast<float*>(workspace) : nullptr;
  LaunchAfterPrior(GemvKernel<F, NT, T, H, Y>,
                   dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(splits)), kThreads, 0,
                   stream, x, m, w, n, k, per, y, partial, ScaledPrefetch());
  CheckLaunch("BlockScaledGemv");
  if (partial != nullptr) {
    LaunchAfterPrior(SumSplitsKernel<Y>, Blocks(m * n, 256), 256, 0, stream, partial, splits, m, n,
                     w.row_scale, PostOf<F, H>(), y);
    CheckLaunch("BlockScaledGemv (split sums)");
  }
}

// Whether one input group of this shape takes the staged kernel. Shapes only, so the workspace
// query agrees with the launch; a launch whose pointers are not 16-byte aligned takes the register
// kernels with at most the workspace that was asked for.
bool StagedShape(int64_t m, int64_t k, WeightKind kind) {
  if (!StagesEnabled()) return false;
  ScaledRows probe;
  probe.kind = kind;
  return GroupsOf(m) == 1 && StagedFits(probe, k);
}

template <WeightKind F, bool H>
int StagedResidentBlocks() {
  static int per_sm = [] {
    auto kernel = StagedGemvKernel<F, H, bf16>;
    int b = 0;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             GemvStages<F>::kBytes) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, kThreads,
                                                      GemvStages<F>::kBytes) != cudaSuccess ||
        b <= 0) {
      cudaGetLastError();
      b = 1;
    }
    return b;
  }();
  return per_sm * SmCount();
}

// The staged kernel's K splits (whole rounds of 8 steps each): the count minimizing the most
// rounds any persistent block streams, each item also costing a quarter round (its sums) and each
// further split 3 % (the partial sums and their reduction). Returns {splits, steps per split}.
struct StagedPlan {
  int64_t splits, steps_per_split, grid;
};
StagedPlan PlanStagedSplits(int64_t m, int64_t n, int64_t k, WeightKind kind) {
  const int64_t tiles = (n + 16 * kStagedTiles - 1) / (16 * kStagedTiles);
  const int64_t steps = StepsOf(kind, k);
  const int64_t capacity = kind == WeightKind::kMxfp8
                               ? StagedResidentBlocks<WeightKind::kMxfp8, false>()
                               : StagedResidentBlocks<WeightKind::kNvfp4, true>();
  const int64_t rounds_all = (steps + kStagedRoundSteps - 1) / kStagedRoundSteps;
  StagedPlan best{1, rounds_all * kStagedRoundSteps, std::min(tiles, capacity)};
  double best_cost = 1e300;
  for (int64_t s = 1; s <= std::min<int64_t>(kMaxSplits, rounds_all); ++s) {
    const int64_t rounds = (rounds_all + s - 1) / s, splits = (rounds_all + rounds - 1) / rounds;
    if (splits > 1 && static_cast<size_t>(splits * m * n) * 4 > kMaxPartialBytes) break;
    const int64_t items = tiles * splits, per_block = (items + capacity - 1) / capacity;
    const double cost = static_cast<double>(per_block) * (static_cast<double>(rounds) + 0.25) *
                        (1.0 + 0.03 * static_cast<double>(splits - 1));
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = {splits, rounds * kStagedRoundSteps, std::min(items, capacity)};
    }
  }
  return best;
}

template <WeightKind F, bool H, typename Y>
void LaunchStaged(const bf16* x, int64_t m, const ScaledRows& w, int64_t n, int64_t k, Y* y,
                  void* workspace, cudaStream_t stream) {
  const StagedPlan plan = PlanStagedSplits(m, n, k, F);
  const int64_t splits = plan.splits;
  float* partial = splits > 1 ? static_cast<float*>(workspace) : nullptr;
  auto kernel = StagedGemvKernel<F, H, Y>;
  // Per launch: the opt-in is per device (tensor-parallel ranks share the process).
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           GemvStages<F>::kBytes) != cudaSuccess)
    throw std::runtime_error("BlockScaledGemv: shared memory opt-in failed");
  LaunchAfterPrior(kernel, dim3(static_cast<unsigned>(plan.grid)), kThreads, GemvStages<F>::kBytes,
                   stream, x, m, w, n, k, splits, plan.steps_per_split, y, partial);
  CheckLaunch("BlockScaledGemv (staged)");
  if (partial != nullptr) {
    LaunchAfterPrior(SumSplitsKernel<Y>, Blocks(m * n, 256), 256, 0, stream, partial, splits, m, n,
                     w.row_scale, PostOf<F, H>(), y);
    CheckLaunch("BlockScaledGemv (split sums)");
  }
}

template <WeightKind F, int T, typename Y>
void LaunchOne(const bf16* x, int64_t m, const ScaledRows& w, int64_t n, int64_t k, Y* y, void* ws,
               size_t ws_bytes, cudaStream_t stream) {
  if constexpr (F == WeightKind::kNvfp4)
    if (NvHalfForm()) return Launch<F, 1, T, true>(x, m, w, n, k, y, ws, ws_bytes, stream);
  Launch<F, 1, T, false>(x, m, w, n, k, y, ws, ws_bytes, stream);
}

template <WeightKind F, typename Y>
void LaunchGroups(const bf16* x, int64_t m, const ScaledRows& w, int64_t n, int64_t k, Y* y,
                  void* ws, size_t ws_bytes, cudaStream_t stream) {
  if (StagedShape(m, k, F)) {
    const int64_t splits = PlanStagedSplits(m, n, k, F).splits;
    if (StagedFits(w, k) &&
        (splits == 1 || (ws != nullptr && ws_bytes >= static_cast<size_t>(splits * m * n) * 4)))
      return LaunchStaged<F, F == WeightKind::kNvfp4, Y>(x, m, w, n, k, y, ws, stream);
  }
  switch (GroupsOf(m)) {
    case 1:
      switch (TilesFor(1, F)) {
        case 4:
          return LaunchOne<F, 4>(x, m, w, n, k, y, ws, ws_bytes, stream);
        case 2:
          return LaunchOne<F, 2>(x, m, w, n, k, y, ws, ws_bytes, stream);
        default:
          return LaunchOne<F, 1>(x, m, w, n, k, y, ws, ws_bytes, stream);
      }
    case 2:
      return Launch<F, 2, 1, false>(x, m, w, n, k, y, ws, ws_bytes, stream);
    case 4:
      return Launch<F, 4, 1, false>(x, m, w, n, k, y, ws, ws_bytes, stream);
    default:
      return Launch<F, 8, 1, false>(x, m, w, n, k, y, ws, ws_bytes, stream);
  }
}

}  // namespace

bool BlockScaledGemvFits(int64_t m, int64_t k, WeightKind kind) {
  return kind != WeightKind::kBf16 && m >= 1 && m <= kBlockScaledGemvMaxRows && k > 0 &&
         k % 32 == 0;
}

size_t BlockScaledGemvWorkspaceBytes(int64_t m, int64_t n, int64_t k, WeightKind kind) {
  if (!BlockScaledGemvFits(m, k, kind) || n <= 0) return 0;
  const int64_t splits = StagedShape(m, k, kind)
                             ? PlanStagedSplits(m, n, k, kind).splits
                             : PlanSplits(m, n, k, kind, TilesFor(GroupsOf(m), kind));
  return splits > 1 ? static_cast<size_t>(splits * m * n) * 4 : 0;
}

void BlockScaledGemv(const bf16* x, int64_t m, const ScaledRows& w, int64_t n, int64_t k, void* y,
                     ElemType yt, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  if (!BlockScaledGemvFits(m, k, w.kind))
    throw std::runtime_error("BlockScaledGemv: unsupported shape (m " + std::to_string(m) + ", k " +
                             std::to_string(k) + ")");
  if (w.kind == WeightKind::kNvfp4 && w.row_scale == nullptr)
    throw std::runtime_error("BlockScaledGemv: NVFP4 weights without their row scales");
  const bool f32 = yt == ElemType::kF32;
  if (w.kind == WeightKind::kMxfp8) {
    if (f32)
      LaunchGroups<WeightKind::kMxfp8>(x, m, w, n, k, static_cast<float*>(y), workspace,
                                       workspace_bytes, stream);
    else
      LaunchGroups<WeightKind::kMxfp8>(x, m, w, n, k, static_cast<bf16*>(y), workspace,
                                       workspace_bytes, stream);
  } else {
    if (f32)
      LaunchGroups<WeightKind::kNvfp4>(x, m, w, n, k, static_cast<float*>(y), workspace,
                                       workspace_bytes, stream);
    else
      LaunchGroups<WeightKind::kNvfp4>(x, m, w, n, k, static_cast<bf16*>(y), workspace,
                                       workspace_bytes, stream);
  }
}

}  // namespace m3::kernels::cuda
