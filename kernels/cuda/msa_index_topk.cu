// IndexTopK: scores become 32-bit keys (order-preserving float bits inverted: ascending key =
// descending score; the block index breaks ties, lower first). For k <= 32 one warp per
// (row, head) finds the k-th key by radix select (8-bit digits from the top, a shared-memory
// histogram per pass, starting below the bits all of the row's keys share, stopping once the
// digit's bin holds exactly the keys still wanted), takes
// the keys below it and the lowest-indexed equal ones in one ballot pass, and sorts those k by
// a warp bitonic sort: a few passes over the row, no block barriers, so prefill's hundreds of
// thousands of (row, head) selections stay cheap. Larger k: one block per (row, head) bitonic-
// sorts all (key, block) pairs in shared memory.
#include "kernels/cuda/msa_index_topk.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int64_t kMaxBlocks = 16384;

__device__ __forceinline__ uint64_t SortKey(float v, uint32_t index) {
  const uint32_t bits = __float_as_uint(v);
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
  return (uint64_t{~ordered} << 32) | index;
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

__device__ __forceinline__ uint32_t AscKey(float v) {
  return static_cast<uint32_t>(SortKey(v, 0) >> 32);
}

constexpr int kRadixWarps = 4;
constexpr size_t kMaxStagedBytes = 96 * 1024;  // 6144 blocks (768K tokens) per row staged

// kStaged: each warp first copies its row's keys into shared memory (loads unrolled, many in
// flight) so the passes read shared memory; without it (very long block tables) they re-read
// the row through L1.
template <bool kStaged>
__global__ void __launch_bounds__(kRadixWarps * 32)
    RadixTopKKernel(const float* scores, PagedLayout L, int64_t heads, int64_t block_size,
                    int64_t max_blocks, int64_t topk, int64_t local_blocks, int32_t* selected) {
  __shared__ uint32_t hist[kRadixWarps][256];
  __shared__ uint64_t cand[kRadixWarps][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t g = int64_t{blockIdx.x} * kRadixWarps + warp;
  if (g >= L.rows * heads) return;
  const int64_t r = g / heads, h = g % heads;
  const int64_t s = L.SeqOf(r), pos = L.PositionOf(s, r);
  int nb = static_cast<int>(pos / block_size + 1);
  if (nb > max_blocks) nb = static_cast<int>(max_blocks);
  const int k = static_cast<int>(topk < nb ? topk : nb);
  const int first_local = nb - static_cast<int>(local_blocks);  // clamped at 0 by the compare
  const float* row = scores + (r * heads + h) * max_blocks;
  extern __shared__ uint32_t staged[];
  uint32_t* mine = staged + warp * max_blocks;
  auto load_key = [&](int i) { return i >= first_local ? AscKey(INFINITY) : AscKey(row[i]); };
  if constexpr (kStaged) {
#pragma unroll 8
    for (int i = lane; i < nb; i += 32) mine[i] = load_key(i);
    __syncwarp();
  }
  auto key_at = [&](int i) { return kStaged ? mine[i] : load_key(i); };
  const uint32_t lt_mask = (1u << lane) - 1;

  // The bits every key shares (a row's block maxima mostly share sign and exponent) are fixed
  // at once: digits start below them, so the histogram bins spread instead of all lanes
  // contending for one.
  uint32_t all_and = ~0u, all_or = 0u;
  for (int i = lane; i < nb; i += 32) {
    const uint32_t key = key_at(i);
    all_and &= key;
    all_or |= key;
  }
  all_and = __reduce_and_sync(0xffffffffu, all_and);
  all_or = __reduce_or_sync(0xffffffffu, all_or);
  const uint32_t differ = all_and ^ all_or;
  // Radix select of the k-th smallest key: prefix/mask hold the bits fixed so far, want is how
  // many keys matching the prefix are still to be taken.
  const int top = differ == 0 ? -1 : 31 - __clz(differ);
  uint32_t mask = top < 0 ? ~0u : top >= 31 ? 0u : ~((2u << top) - 1u);  // the shared bits
  uint32_t prefix = all_and & mask;
  int want = k;
  for (int hi = top; hi >= 0; hi -= 8) {
    const int lo = hi >= 7 ? hi - 7 : 0;
    const uint32_t width_mask = (2u << (hi - lo)) - 1u;
#pragma unroll
    for (int e = 0; e < 8; ++e) hist[warp][lane * 8 + e] = 0;
    __syncwarp();
    for (int i = lane; i < nb; i += 32) {
      const uint32_t key = key_at(i);
      if ((key & mask) == prefix) atomicAdd(&hist[warp][(key >> lo) & width_mask], 1u);
    }
    __syncwarp();
    uint32_t c[8], total = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      c[e] = hist[warp][lane * 8 + e];
      total += c[e];
    }
    uint32_t incl = total;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint32_t n = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += n;
    }
    const uint32_t excl = incl - total;
    const uint32_t w = static_cast<uint32_t>(want);
    const int src = __ffs(__ballot_sync(0xffffffffu, excl < w && w <= incl)) - 1;
    int digit = 0;
    uint32_t below = excl, in_bin = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (in_bin == 0 && below + c[e] >= w && c[e] > 0) {
        digit = lane * 8 + e;
        in_bin = c[e];
      } else if (in_bin == 0) {
        below += c[e];
      }
    digit = __shfl_sync(0xffffffffu, digit, src);
    below = __shfl_sync(0xffffffffu, below, src);
    in_bin = __shfl_sync(0xffffffffu, in_bin, src);
    want -= static_cast<int>(below);
    prefix |= static_cast<uint32_t>(digit) << lo;
    mask |= width_mask << lo;
    __syncwarp();
    if (in_bin == static_cast<uint32_t>(want)) break;  // the whole bin is taken
  }

  // Keys below the prefix all go in (k - want of them), then the first `want` equal ones by
  // block index; candidates land in index order.
  int less_seen = 0, eq_seen = 0;
  for (int i0 = 0; i0 < nb; i0 += 32) {
    const int i = i0 + lane;
    const uint32_t key = i < nb ? key_at(i) : ~0u;
    const bool less = i < nb && (key & mask) < prefix;
    const bool eq = i < nb && (key & mask) == prefix;
    const uint32_t bl = __ballot_sync(0xffffffffu, less), be = __ballot_sync(0xffffffffu, eq);
    const uint64_t packed = (uint64_t{key} << 32) | static_cast<uint32_t>(i);
    if (less) cand[warp][less_seen + __popc(bl & lt_mask)] = packed;
    if (eq) {
      const int rank = eq_seen + __popc(be & lt_mask);
      if (rank < want) cand[warp][k - want + rank] = packed;
    }
    less_seen += __popc(bl);
    eq_seen += __popc(be);
  }
  __syncwarp();
  uint64_t v = lane < k ? cand[warp][lane] : ~uint64_t{0};
  for (int size = 2; size <= 32; size <<= 1)
    for (int j = size >> 1; j > 0; j >>= 1) {
      const uint64_t other = __shfl_xor_sync(0xffffffffu, v, j);
      const bool ascending = (lane & size) == 0, lower = (lane & j) == 0;
      v = (lower == ascending) ? (v < other ? v : other) : (v < other ? other : v);
    }
  const uint32_t neg_inf = AscKey(-INFINITY);
  if (lane < topk) {
    int32_t* out = selected + (h * L.rows + r) * topk;
    out[lane] = lane < k && static_cast<uint32_t>(v >> 32) != neg_inf
                    ? static_cast<int32_t>(v & 0xffffffffu)
                    : -1;
  }
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
  if (topk <= 32) {
    const int64_t warps = layout.rows * heads;
    const size_t staged = static_cast<size_t>(kRadixWarps * max_blocks) * sizeof(uint32_t);
    if (staged <= kMaxStagedBytes) {
      static const bool attr = [] {
        cudaFuncSetAttribute(RadixTopKKernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kMaxStagedBytes));
        return true;
      }();
      (void)attr;
      RadixTopKKernel<true><<<Blocks(warps, kRadixWarps), kRadixWarps * 32, staged, stream>>>(
          scores, layout, heads, block_size, max_blocks, topk, local_blocks, selected);
    } else {
      RadixTopKKernel<false><<<Blocks(warps, kRadixWarps), kRadixWarps * 32, 0, stream>>>(
          scores, layout, heads, block_size, max_blocks, topk, local_blocks, selected);
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
