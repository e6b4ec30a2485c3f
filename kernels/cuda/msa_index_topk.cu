// IndexTopK: scores become 32-bit keys (order-preserving float bits inverted: ascending key =
// descending score; the block index breaks ties, lower first). For k <= 32 (and rows staged in
// shared memory) a warp finds the k-th key by radix select (8-bit digits starting below the
// bits all of its keys share, a shared-memory histogram per pass, stopping once the digit's
// bin holds exactly the keys still wanted), takes the keys below it and the lowest-indexed
// equal ones in one ballot pass, and sorts those k by a warp bitonic sort: a few passes over
// the row, no block barriers, so prefill's hundreds of thousands of selections stay cheap.
// Few (row, head) pairs (decode) take one thread block each: every warp keeps the 32 smallest
// (key, block) pairs of its share of the row as a sorted register list (each 32-key batch that
// can enter is bitonic-sorted and merged in), and the warps' lists merge pairwise in a tree.
// Larger k or very long block tables: one block per (row, head) bitonic-sorts all (key, block)
// pairs in shared memory.
#include "kernels/cuda/msa_index_topk.cuh"

#include "kernels/cuda/msa_topk_select.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int64_t kMaxBlocks = 16384;

__device__ __forceinline__ uint64_t SortKey(float v, uint32_t index) {
  return Composite(AscKey(v), index);
}

__global__ void __launch_bounds__(kThreads)
    TopKKernel(const float* scores, PagedLayout L, int64_t heads, int64_t block_size,
               int64_t max_blocks, int64_t topk, int64_t local_blocks, int32_t* selected) {
  extern __shared__ uint64_t key[];
  const int64_t r = blockIdx.x, h = blockIdx.y;
  const int64_t s = L.SeqOf(r), pos = L.PositionOf(s, r);
  int64_t nb = pos / block_size + 1;
  if (nb > max_blocks) nb = max_blocks;  // the layout's own bound; never past the workspace
  int64_t n = 1;
  while (n < nb) n <<= 1;
  const float* row = scores + (r * heads + h) * max_blocks;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    if (i < nb) {
      const bool local = i >= nb - local_blocks;  // clamped at block 0, as the twin
      key[i] = SortKey(local ? INFINITY : row[i], static_cast<uint32_t>(i));
    } else {
      key[i] = ~uint64_t{0};
    }
  }
  __syncthreads();
  for (int64_t k = 2; k <= n; k <<= 1)
    for (int64_t j = k >> 1; j > 0; j >>= 1) {
      for (int64_t i = threadIdx.x; i < n; i += kThreads) {
        const int64_t ixj = i ^ j;
        if (ixj > i) {
          const uint64_t x = key[i], y = key[ixj];
          if ((x > y) == ((i & k) == 0)) {
            key[i] = y;
            key[ixj] = x;
          }
        }
      }
      __syncthreads();
    }
  const uint64_t neg_inf = SortKey(-INFINITY, 0) >> 32;
  int32_t* out = selected + (h * L.rows + r) * topk;
  for (int64_t i = threadIdx.x; i < topk; i += kThreads)
    out[i] = i < nb && (key[i] >> 32) != neg_inf ? static_cast<int32_t>(key[i] & 0xffffffffu) : -1;
}

// Bitonic sort of one value per lane across the warp, ascending by lane.
__device__ __forceinline__ uint64_t WarpSortAscending(uint64_t v, int lane) {
#pragma unroll
  for (int size = 2; size <= 32; size <<= 1)
#pragma unroll
    for (int j = size >> 1; j > 0; j >>= 1) {
      const uint64_t other = __shfl_xor_sync(0xffffffffu, v, j);
      const bool ascending = (lane & size) == 0, lower = (lane & j) == 0;
      v = (lower == ascending) ? (v < other ? v : other) : (v < other ? other : v);
    }
  return v;
}

// The 32 smallest of two ascending warp lists, ascending: the lane-wise min of a and reversed
// b is a bitonic sequence holding them, which one bitonic merge sorts.
__device__ __forceinline__ uint64_t MergeSorted(uint64_t a, uint64_t b, int lane) {
  const uint64_t rb = __shfl_sync(0xffffffffu, b, 31 - lane);
  uint64_t v = a < rb ? a : rb;
#pragma unroll
  for (int j = 16; j > 0; j >>= 1) {
    const uint64_t other = __shfl_xor_sync(0xffffffffu, v, j);
    v = (lane & j) == 0 ? (v < other ? v : other) : (v < other ? other : v);
  }
  return v;
}

constexpr int kRadixWarps = 4;
constexpr size_t kMaxStagedBytes = 96 * 1024;  // per thread block

// The block count of row r (clamped to the layout's bound, never past the workspace).
__device__ __forceinline__ int RowBlocks(const PagedLayout& L, int64_t r, int64_t block_size,
                                         int64_t max_blocks) {
  const int64_t s = L.SeqOf(r), pos = L.PositionOf(s, r);
  const int64_t nb = pos / block_size + 1;
  return static_cast<int>(nb < max_blocks ? nb : max_blocks);
}

// One warp per (row, head), kRadixWarps per thread block. A warp first copies its keys into
// shared memory (loads unrolled, many in flight), then selects from there.
__global__ void __launch_bounds__(kRadixWarps * 32)
    RadixTopKKernel(const float* scores, PagedLayout L, int64_t heads, int64_t block_size,
                    int64_t max_blocks, int64_t topk, int64_t local_blocks, int32_t* selected) {
  ChainedKernelStart();
  __shared__ uint32_t hist[kRadixWarps][256];
  __shared__ uint64_t cand[kRadixWarps][32];
  extern __shared__ uint32_t staged[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t g = int64_t{blockIdx.x} * kRadixWarps + warp;  // (row, head) pair
  if (g >= L.rows * heads) return;
  const int64_t r = g / heads, h = g % heads;
  const int n = RowBlocks(L, r, block_size, max_blocks);
  const int kw = static_cast<int>(topk < n ? topk : n);
  const int first_local = n - static_cast<int>(local_blocks);  // clamped at 0 by the compare
  const float* row = scores + (r * heads + h) * max_blocks;
  uint32_t* mine = staged + warp * max_blocks;
#pragma unroll 8
  for (int i = lane; i < n; i += 32) mine[i] = i >= first_local ? AscKey(INFINITY) : AscKey(row[i]);
  __syncwarp();
  const uint32_t lt_mask = (1u << lane) - 1;

  // The bits every key shares (a row's block maxima mostly share sign and exponent) are fixed
  // at once: digits start below them, so the histogram bins spread instead of all lanes
  // contending for one.
  uint32_t all_and = ~0u, all_or = 0u;
  for (int i = lane; i < n; i += 32) {
    all_and &= mine[i];
    all_or |= mine[i];
  }
  all_and = __reduce_and_sync(0xffffffffu, all_and);
  all_or = __reduce_or_sync(0xffffffffu, all_or);
  const uint32_t differ = all_and ^ all_or;
  // Radix select of the kw-th smallest key: prefix/mask hold the bits fixed so far, want is how
  // many keys matching the prefix are still to be taken.
  const int top = differ == 0 ? -1 : 31 - __clz(differ);
  uint32_t mask = top < 0 ? ~0u : top >= 31 ? 0u : ~((2u << top) - 1u);  // the shared bits
  uint32_t prefix = all_and & mask;
  int want = kw;
  for (int hi = top; hi >= 0 && kw > 0; hi -= 8) {
    const int lo = hi >= 7 ? hi - 7 : 0;
    const uint32_t width_mask = (2u << (hi - lo)) - 1u;
#pragma unroll
    for (int e = 0; e < 8; ++e) hist[warp][lane * 8 + e] = 0;
    __syncwarp();
    for (int i = lane; i < n; i += 32) {
      const uint32_t key = mine[i];
      if ((key & mask) == prefix) atomicAdd(&hist[warp][(key >> lo) & width_mask], 1u);
    }
    __syncwarp();
    const RadixDigit d = FindRadixDigit(hist[warp], want, lane);
    want -= static_cast<int>(d.below);
    prefix |= static_cast<uint32_t>(d.digit) << lo;
    mask |= width_mask << lo;
    __syncwarp();
    if (d.in_bin == static_cast<uint32_t>(want)) break;  // the whole bin is taken
  }

  // Keys below the prefix all go in (kw - want of them), then the first `want` equal ones by
  // block index; candidates land in index order.
  int less_seen = 0, eq_seen = 0;
  for (int i0 = 0; i0 < n; i0 += 32) {
    const int i = i0 + lane;
    const uint32_t key = i < n ? mine[i] : ~0u;
    const bool less = i < n && (key & mask) < prefix;
    const bool eq = i < n && (key & mask) == prefix;
    const uint32_t bl = __ballot_sync(0xffffffffu, less), be = __ballot_sync(0xffffffffu, eq);
    const uint64_t packed = (uint64_t{key} << 32) | static_cast<uint32_t>(i);
    if (less) cand[warp][less_seen + __popc(bl & lt_mask)] = packed;
    if (eq) {
      const int rank = eq_seen + __popc(be & lt_mask);
      if (rank < want) cand[warp][kw - want + rank] = packed;
    }
    less_seen += __popc(bl);
    eq_seen += __popc(be);
  }
  __syncwarp();
  const uint64_t v = WarpSortAscending(lane < kw ? cand[warp][lane] : ~uint64_t{0}, lane);
  if (lane < topk) selected[(h * L.rows + r) * topk + lane] = Emitted(lane, kw, v);
}

constexpr int kMergeWarps = 16;

// One thread block of kMergeWarps warps per (row, head), for steps with few of them (decode).
// Warp w takes the row's 32-key batches w, w + kMergeWarps, ...; a batch is sorted and merged
// into the warp's list only when one of its keys beats the list's 32nd (on very long rows most
// late batches do not). Exact: each list always holds the 32 smallest keys its warp has seen,
// so the tree of merges ends with the row's 32 smallest.
__global__ void __launch_bounds__(kMergeWarps * 32)
    MergeTopKKernel(const float* scores, PagedLayout L, int64_t heads, int64_t block_size,
                    int64_t max_blocks, int64_t topk, int64_t local_blocks, int32_t* selected) {
  ChainedKernelStart();
  __shared__ uint64_t lists[kMergeWarps][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t r = blockIdx.x, h = blockIdx.y;
  const int nb = RowBlocks(L, r, block_size, max_blocks);
  const int first_local = nb - static_cast<int>(local_blocks);
  const float* row = scores + (r * heads + h) * max_blocks;
  uint64_t list = ~uint64_t{0};
  for (int b0 = warp * 32; b0 < nb; b0 += kMergeWarps * 32) {
    const int i = b0 + lane;
    uint64_t x = ~uint64_t{0};
    if (i < nb) {
      const uint32_t key = i >= first_local ? AscKey(INFINITY) : AscKey(row[i]);
      x = (uint64_t{key} << 32) | static_cast<uint32_t>(i);
    }
    const uint64_t worst = __shfl_sync(0xffffffffu, list, 31);
    if (!__any_sync(0xffffffffu, x < worst)) continue;
    list = MergeSorted(list, WarpSortAscending(x, lane), lane);
  }
  lists[warp][lane] = list;
  __syncthreads();
  for (int half = kMergeWarps / 2; half > 0; half >>= 1) {
    if (warp < half) list = MergeSorted(list, lists[warp + half][lane], lane);
    __syncthreads();
    if (warp < half) lists[warp][lane] = list;
    __syncthreads();
  }
  const int k = static_cast<int>(topk < nb ? topk : nb);
  if (warp == 0 && lane < topk) selected[(h * L.rows + r) * topk + lane] = Emitted(lane, k, list);
}

}  // namespace

void IndexTopK(const float* scores, const PagedLayout& layout, int64_t heads, int64_t block_size,
               int64_t max_blocks, int64_t topk, int64_t local_blocks, int32_t* selected,
               cudaStream_t stream) {
  if (layout.rows <= 0 || topk <= 0) return;
  if (max_blocks > kMaxBlocks)
    throw std::runtime_error("MSA top-k: " + std::to_string(max_blocks) +
                             " key blocks per sequence is above the supported " +
                             std::to_string(kMaxBlocks));
  const size_t staged_bytes = static_cast<size_t>(kRadixWarps * max_blocks) * sizeof(uint32_t);
  if (topk <= 32 && staged_bytes <= kMaxStagedBytes) {
    const int64_t pairs = layout.rows * heads;
    // A thread block per pair when they are few (decode; 128K at batch 1 took 7.8 us with a
    // radix select split over 8 warps), a warp per pair when there are many (prefill).
    if (pairs < 512) {
      const dim3 grid(static_cast<unsigned>(layout.rows), static_cast<unsigned>(heads));
      LaunchAfterPrior(MergeTopKKernel, grid, kMergeWarps * 32, 0, stream, scores, layout, heads,
                       block_size, max_blocks, topk, local_blocks, selected);
    } else {
      AllowDynamicShared<RadixTopKKernel>(kMaxStagedBytes);
      LaunchAfterPrior(RadixTopKKernel, Blocks(pairs, kRadixWarps), kRadixWarps * 32, staged_bytes,
                       stream, scores, layout, heads, block_size, max_blocks, topk, local_blocks,
                       selected);
    }
    CheckLaunch("IndexTopK");
    return;
  }
  int64_t n = 1;
  while (n < max_blocks) n <<= 1;
  const size_t smem = static_cast<size_t>(n) * sizeof(uint64_t);
  if (smem > 48 * 1024)
    cudaFuncSetAttribute(TopKKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  const dim3 grid(static_cast<unsigned>(layout.rows), static_cast<unsigned>(heads));
  TopKKernel<<<grid, kThreads, smem, stream>>>(scores, layout, heads, block_size, max_blocks, topk,
                                               local_blocks, selected);
  CheckLaunch("IndexTopK");
}

}  // namespace m3::kernels::cuda
