// BlockScaledGemv: a block of 8 warps per 16 weight rows (one MMA tile) and K range; its warps
// take the range's steps in turn and sum through shared memory. The K range is the whole row
// unless the row tiles alone would leave the GPU's resident blocks partly idle (few rows, or a
// last wave of blocks much smaller than the others): then the grid also splits K and a second
// kernel adds the splits' f32 partial sums. Input rows go in groups of 8 (the MMA's N): 1 to 8
// rows cost one group, up to 64 rows eight, each weight tile dequantized once for all of them.
#include "kernels/cuda/block_scaled_gemv.cuh"

#include <algorithm>
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

template <WeightKind F, int NT, typename Y>
__global__ void __launch_bounds__(kThreads, 2)
    GemvKernel(const bf16* x, int64_t m, ScaledRows w, int64_t n, int64_t k,
               int64_t steps_per_split, Y* y, float* partial) {
  ChainedKernelStart();
  constexpr int kCols = NT * 8;
  constexpr int U = UnrollOf<NT>();
  __shared__ float red[kWarps][16][kCols + 1];
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t row0 = int64_t{blockIdx.x} * 16;
  const TileLane tile[1] = {TileOf<F>(w, row0, n, k)};
  const bf16* xrow[NT];
#pragma unroll
  for (int c = 0; c < NT; ++c) {
    const int64_t tok = c * 8 + g;
    xrow[c] = tok < m ? x + tok * k : nullptr;
  }
  float acc[1][NT][4] = {};
  const int64_t steps = StepsOf(F, k);
  const int64_t s0 = int64_t{blockIdx.y} * steps_per_split;
  const int64_t s1 = min(steps, s0 + steps_per_split);
  TileMma<F, 1, NT, U>(tile, xrow, s0 + warp, s1, kWarps, k, acc);
#pragma unroll
  for (int c = 0; c < NT; ++c) {
    red[warp][g][c * 8 + 2 * t] = acc[0][c][0];
    red[warp][g][c * 8 + 2 * t + 1] = acc[0][c][1];
    red[warp][g + 8][c * 8 + 2 * t] = acc[0][c][2];
    red[warp][g + 8][c * 8 + 2 * t + 1] = acc[0][c][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 16 * kCols; i += kThreads) {
    const int r = i % 16, c = i / 16;  // consecutive threads: consecutive outputs of a row
    const int64_t row = row0 + r;
    if (row >= n || c >= m) continue;
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < kWarps; ++q) sum += red[q][r][c];
    if (partial != nullptr) {
      partial[(int64_t{blockIdx.y} * m + c) * n + row] = sum;
    } else {
      const float f = Kind<F>::kPost * (w.row_scale ? w.row_scale[row] : 1.0f);
      Store(y, c * n + row, sum * f);
    }
  }
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
template <WeightKind F, int NT>
int ResidentBlocks() {
  static int per_sm = [] {
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, GemvKernel<F, NT, bf16>, kThreads, 0) !=
            cudaSuccess ||
        b <= 0) {
      cudaGetLastError();
      b = 2;
    }
    return b;
  }();
  return per_sm * SmCount();
}

template <WeightKind F>
int ResidentBlocksOf(int groups) {
  switch (groups) {
    case 1:
      return ResidentBlocks<F, 1>();
    case 2:
      return ResidentBlocks<F, 2>();
    case 4:
      return ResidentBlocks<F, 4>();
    default:
      return ResidentBlocks<F, 8>();
  }
}

// The K splits: the smallest count whose waves of blocks fill the resident slots best (each
// warp keeps at least one step; the partial sums at most kMaxPartialBytes).
constexpr size_t kMaxPartialBytes = size_t{64} << 20;
int64_t PlanSplits(int64_t m, int64_t n, int64_t k, WeightKind kind) {
  const int64_t tiles = (n + 15) / 16, steps = StepsOf(kind, k);
  const int capacity = kind == WeightKind::kMxfp8
                           ? ResidentBlocksOf<WeightKind::kMxfp8>(GroupsOf(m))
                           : ResidentBlocksOf<WeightKind::kNvfp4>(GroupsOf(m));
  const int64_t most = std::min<int64_t>(kMaxSplits, std::max<int64_t>(1, steps / kWarps));
  int64_t best = 1;
  double best_score = -1.0;
  for (int64_t s = 1; s <= most; ++s) {
    if (s > 1 && static_cast<size_t>(s * m * n) * 4 > kMaxPartialBytes) break;
    const int64_t blocks = tiles * s;
    const int64_t waves = (blocks + capacity - 1) / capacity;
    const double fill = static_cast<double>(blocks) / static_cast<double>(waves * capacity);
    const double score = fill - 0.02 * static_cast<double>(s);  // each split costs a little
    if (score > best_score + 1e-9) {
      best_score = score;
      best = s;
    }
  }
  return best;
}

template <WeightKind F, int NT, typename Y>
void Launch(const bf16* x, int64_t m, const ScaledRows& w, int64_t n, int64_t k, Y* y,
            void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const int64_t tiles = (n + 15) / 16, steps = StepsOf(F, k);
  int64_t splits = PlanSplits(m, n, k, F);
  if (workspace == nullptr || workspace_bytes < static_cast<size_t>(splits * m * n) * 4)
    splits = 1;  // a smaller workspace than asked for: one pass over K
  const int64_t per = (steps + splits - 1) / splits;
  float* partial = splits > 1 ? static_cast<float*>(workspace) : nullptr;
  LaunchAfterPrior(GemvKernel<F, NT, Y>,
                   dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)), kThreads, 0,
                   stream, x, m, w, n, k, per, y, partial);
  CheckLaunch("BlockScaledGemv");
  if (partial != nullptr) {
    LaunchAfterPrior(SumSplitsKernel<Y>, Blocks(m * n, 256), 256, 0, stream, partial, splits, m, n,
                     w.row_scale, Kind<F>::kPost, y);
    CheckLaunch("BlockScaledGemv (split sums)");
  }
}

template <WeightKind F, typename Y>
void LaunchGroups(const bf16* x, int64_t m, const ScaledRows& w, int64_t n, int64_t k, Y* y,
                  void* ws, size_t ws_bytes, cudaStream_t stream) {
  switch (GroupsOf(m)) {
    case 1:
      return Launch<F, 1>(x, m, w, n, k, y, ws, ws_bytes, stream);
    case 2:
      return Launch<F, 2>(x, m, w, n, k, y, ws, ws_bytes, stream);
    case 4:
      return Launch<F, 4>(x, m, w, n, k, y, ws, ws_bytes, stream);
    default:
      return Launch<F, 8>(x, m, w, n, k, y, ws, ws_bytes, stream);
  }
}

}  // namespace

bool BlockScaledGemvFits(int64_t m, int64_t k, WeightKind kind) {
  return kind != WeightKind::kBf16 && m >= 1 && m <= kBlockScaledGemvMaxRows && k > 0 &&
         k % 32 == 0;
}

size_t BlockScaledGemvWorkspaceBytes(int64_t m, int64_t n, int64_t k, WeightKind kind) {
  if (!BlockScaledGemvFits(m, k, kind) || n <= 0) return 0;
  const int64_t splits = PlanSplits(m, n, k, kind);
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
