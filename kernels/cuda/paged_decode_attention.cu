// Split-K decode attention: each of a CTA's four warps streams its own 16-key tiles of the
// split's key range through a three-stage cp.async pipeline into its own shared tiles and runs
// them through the tensor-core tile (its 16 M rows are the group's q heads); the warps merge in
// shared memory, then either write the row's output (one split), the split's partial (merged
// by a combine kernel), or, for sparse rows at small batch, send it in shares to the CTAs of a
// thread-block cluster (one cluster per row and group) that own them, by asynchronous stores
// into their shared-memory mailboxes (cluster_mailbox.cuh): no partials in global memory and
// no second kernel, which at batch 1 were most of the attention's time (the combine's launch
// and 1 MB of partials round trip). A cluster kernel may also select the row's blocks itself
// from the indexer's block scores (msa_topk_select.cuh's BlockTopK, in the tiles' shared memory
// before the first copy), so a small decode step needs no top-k kernel.
#include "kernels/cuda/paged_decode_attention.cuh"

#include <cooperative_groups.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "kernels/cuda/attention_tile.cuh"
#include "kernels/cuda/cluster_mailbox.cuh"
#include "kernels/cuda/msa_topk_select.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kBN = 16;  // keys per warp tile
constexpr int kStages = 3;
constexpr int64_t kRound = kWarps * kBN;  // keys a CTA covers per pipeline step
constexpr int kMaxSparseTopk = 64;        // selection slots a CTA stages
constexpr int kMaxCluster = 16;           // CTAs of a sparse row's cluster

template <int D>
__host__ __device__ constexpr size_t SmemBytes() {
  return size_t{kWarps} * kStages * 2 * kBN * D * sizeof(bf16);
}

// The cluster kernel's mailbox follows the tiles (it is written while they are in use): its
// barrier, then every rank's share of the group's outputs (G x D in all) and its 16 maxima and
// 16 sums.
template <int D>
constexpr size_t ClusterSmemBytes() {
  return SmemBytes<D>() + 16 + (16 * D + 32 * kMaxCluster) * sizeof(float);
}
template <int D>
__device__ __forceinline__ float* Mailbox(unsigned char* smem) {
  return reinterpret_cast<float*>(smem + SmemBytes<D>() + 16);
}

// A selecting kernel (DecodeBlockScores) keeps BlockTopK's shared memory in the tiles' (done
// with before the first copy): the row's block keys, then its survivors (at most one composite
// per block), and the scratch at the end.
using SelectScratch = BlockTopKScratch<kWarps * 32>;
template <int D>
constexpr int64_t SelectKeyCapacity() {
  return static_cast<int64_t>((SmemBytes<D>() - sizeof(SelectScratch) - 8) /
                              (sizeof(uint32_t) + sizeof(uint64_t)));
}
int64_t SelectKeyCapacity(int64_t head_dim) {
  return head_dim == 128 ? SelectKeyCapacity<128>() : SelectKeyCapacity<64>();
}

struct Args {
  const bf16* q;
  const void* k;  // bf16 values, or FP8 codes (k_scales set)
  const void* v;
  PagedLayout layout;
  AttentionDims dims;
  const int32_t* selected;  // null: dense
  int64_t topk;
  int64_t block_size;
  // Non-null: the kernel selects each row's blocks from these block scores (IndexTopK's
  // selection) and its first split writes them to select_out (== selected).
  const float* scores;
  int64_t max_blocks;
  int64_t local_blocks;
  int32_t* select_out;
  int64_t chunk;
  int64_t splits;
  float scale_log2;
  float* part;  // [num_decodes, q_heads, splits, D] unnormalized outputs
  float* ml;    // [num_decodes, q_heads, splits, 2] (max in log2 units, sum)
  bf16* out;
  const float* k_scales;  // FP8 pages' scales (KvPages)
  const float* v_scales;
};

// Shared floats of the merge: the warps' outputs and (max, sum), per head the warps' weights,
// max and sum. Output rows are padded by 8 floats, so the eight rows that a warp's fragment
// stores touch at once start in different banks (unpadded, all eight started in bank 0: an
// 8-way conflict on every store; 128K batch 1 selecting attention 8.6 -> 8.4 us).
template <int D>
struct MergeSmem {
  static constexpr int kRow = D + 8;
  static constexpr int kWarpAcc = 0, kWarpMl = kWarps * 16 * kRow, kWeight = kWarpMl + kWarps * 32,
                       kMax = kWeight + 16 * kWarps, kSum = kMax + 16, kFloats = kSum + 16;
};

// kSelect: the selection is made here from a.scores (cluster kernels only). kFp8: FP8 K/V pages
// (kv_cache_fp8.cuh).
template <int D, bool kCluster, bool kSelect = false, bool kFp8 = false>
__global__ void __launch_bounds__(kWarps * 32, 2) DecodeKernel(Args a) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // Cluster: each CTA's mailbox (after the tiles) receives every rank's share of the partials
  // by asynchronous remote stores that count down its transaction barrier. Initialised before
  // anything else; the cluster barrier that publishes it is waited for only before the first
  // remote store, long after every CTA has arrived.
  if constexpr (kCluster) {
    if (threadIdx.x == 0) MailboxInit(Mailbox<D>(smem_raw), blockDim.x);
    ClusterArriveRelaxed();
  }
  // A selecting kernel follows the indexer's scan (PagedMsaDecodeAttention): the layout and the
  // queries were written before the scan started, so they are read before the wait on it
  // (cuda_util.cuh), their latency overlapping the scan's end (128K batch 1, FP8 index keys:
  // chained MSA 14.1 -> 13.7 us).
  if constexpr (!kSelect) ChainedKernelStart();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = blockIdx.x, g = blockIdx.y, c = blockIdx.z;
  const int64_t hq = a.dims.num_q_heads, hkv = a.dims.num_kv_heads, G = hq / hkv;
  const int64_t s = a.layout.SeqOf(r), pos = a.layout.PositionOf(s, r);
  // The queries first: their loads overlap the selection's below.
  const int g8 = lane >> 2;
  const bf16* qg = a.q + (r * hq + g * G) * D;
  attn::WarpState<D> w;
  attn::InitState<D>(w, g8 < G ? qg + g8 * D : nullptr, g8 + 8 < G ? qg + (g8 + 8) * D : nullptr,
                     lane);
  // Sparse: the split covers [lo, hi) of the row's virtual key list, the selected blocks laid
  // end to end (slot i holds keys [i * block_size, (i + 1) * block_size)); empty and repeated
  // slots and keys past pos are masked. Dense: [lo, hi) are keys.
  __shared__ int32_t blocks[kMaxSparseTopk];
  const bool sparse = a.selected != nullptr;
  const int64_t lo = c * a.chunk;
  int64_t hi = 0;
  if constexpr (kSelect) {
    // The selection made here (no repeats): no top-k kernel, and one launch dependency less
    // before the keys (the indexer's block scores are ready once this kernel may start).
    const int nb = static_cast<int>(pos) / static_cast<int>(a.block_size) + 1;  // 32-bit division
    const int n = nb < a.max_blocks ? nb : static_cast<int>(a.max_blocks);
    auto* scratch =
        reinterpret_cast<SelectScratch*>(smem_raw + SmemBytes<D>() - sizeof(SelectScratch));
    auto* survivors = reinterpret_cast<uint64_t*>(smem_raw + (n + 1) / 2 * 8);
    ChainedKernelStart();
    BlockTopK<kWarps * 32>(a.scores + (r * hkv + g) * a.max_blocks, n,
                           n - static_cast<int>(a.local_blocks), static_cast<int>(a.topk),
                           reinterpret_cast<uint32_t*>(smem_raw), survivors, *scratch, blocks);
    if (c == 0 && threadIdx.x < a.topk)
      a.select_out[(g * a.layout.rows + r) * a.topk + threadIdx.x] = blocks[threadIdx.x];
    hi = min(lo + a.chunk, a.topk * a.block_size);
  } else if (sparse) {
    // Warp 0 loads the slots (lane l: slots l and l + 32) and clears repeats of an earlier
    // slot by warp matching, so the block waits at one barrier for the selection.
    if (warp == 0) {
      const int32_t* sel = a.selected + (g * a.layout.rows + r) * a.topk;
      const int32_t b0 = lane < a.topk ? sel[lane] : -1;
      const int32_t b1 = lane + 32 < a.topk ? sel[lane + 32] : -1;
      const uint32_t below = (1u << lane) - 1u;
      const bool dup0 = (__match_any_sync(0xffffffffu, b0) & below) != 0;
      bool dup1 = (__match_any_sync(0xffffffffu, b1) & below) != 0;
      if (a.topk > 32)
        for (int p = 0; p < 32; ++p) dup1 |= __shfl_sync(0xffffffffu, b0, p) == b1;
      if (lane < a.topk) blocks[lane] = dup0 ? -1 : b0;
      if (lane + 32 < a.topk) blocks[lane + 32] = dup1 ? -1 : b1;
    }
    __syncthreads();
    hi = min(lo + a.chunk, a.topk * a.block_size);
  } else {
    hi = min(lo + a.chunk, pos + 1);
  }
  const int bs = static_cast<int>(a.block_size);
  // The key behind virtual index j of this split, -1 when masked.
  auto key_of = [&](int64_t j) -> int64_t {
    if (j >= hi) return -1;
    if (!sparse) return j;
    const int32_t v = static_cast<int32_t>(j), b = blocks[v / bs];
    const int64_t key = int64_t{b} * bs + v % bs;
    return b >= 0 && key <= pos ? key : -1;
  };

  bf16* tiles = reinterpret_cast<bf16*>(smem_raw) + warp * kStages * 2 * kBN * D;
  const int64_t stride = hkv * D;
  const bf16* kg = static_cast<const bf16*>(a.k) + g * D;
  const bf16* vg = static_cast<const bf16*>(a.v) + g * D;
  const attn::Fp8GroupKv fp8(a.k, a.v, a.k_scales, a.v_scales, g, hkv, D);
  auto load = [&](int64_t j0, int st) {
    bf16* sk = tiles + st * 2 * kBN * D;
    bf16* sv = sk + kBN * D;
    constexpr int kChunks = D / 8;
    // Lane l looks up key l's slot once (-1: masked); the copy loop takes it by shuffle.
    const int64_t key_l = lane < kBN ? key_of(j0 + lane) : -1;
    const int64_t mine = key_l >= 0 ? a.layout.Slot(s, key_l) : -1;
#pragma unroll
    for (int i = lane; i < kBN * kChunks; i += 32) {
      const int key = i / kChunks, ch = i % kChunks;
      const int64_t slot = __shfl_sync(0xffffffffu, mine, key);
      if constexpr (kFp8) {
        const int o = attn::TileOffset<D>(key, ch);
        fp8.Stage(sk + o, sv + o, slot, ch, slot >= 0);
      } else {
        const bool ok = slot >= 0;
        const int64_t off = ok ? slot * stride + ch * 8 : 0;
        attn::CpAsync16(sk + attn::TileOffset<D>(key, ch), kg + off, ok);
        attn::CpAsync16(sv + attn::TileOffset<D>(key, ch), vg + off, ok);
      }
    }
  };
  // kStages - 1 tiles in flight while one is consumed.
  const int64_t first = lo + warp * kBN;
#pragma unroll
  for (int p = 0; p < kStages - 1; ++p) {
    if (first + p * kRound < hi) load(first + p * kRound, p);
    attn::CpAsyncCommit();
  }
  int st = 0;
  for (int64_t j0 = first; j0 < hi; j0 += kRound, st = st + 1 == kStages ? 0 : st + 1) {
    const int64_t ahead = j0 + (kStages - 1) * kRound;
    if (ahead < hi) load(ahead, st == 0 ? kStages - 1 : st - 1);
    attn::CpAsyncCommit();
    attn::CpAsyncWait<kStages - 1>();
    if constexpr (kFp8) {
      bf16* staged = tiles + st * 2 * kBN * D;
      attn::DequantTiles<D>(staged, staged + kBN * D, lane, 32, kBN);
    }
    __syncwarp();
    const uint32_t live = __ballot_sync(0xffffffffu, lane < kBN && key_of(j0 + lane) >= 0);
    const bf16* sk = tiles + st * 2 * kBN * D;
    attn::AttendTile<D, kBN>(
        w, sk, sk + kBN * D, a.scale_log2, [&](int, int key) { return (live >> key) & 1u; }, lane);
    __syncwarp();
  }
  attn::CpAsyncWait<0>();
  attn::FinishRowSums<D>(w);
  __syncthreads();  // every warp is done with its tiles: reuse them for the merge

  using Sm = MergeSmem<D>;
  float* red = reinterpret_cast<float*>(smem_raw);
  constexpr int kRow = Sm::kRow;
  float* wacc = red + Sm::kWarpAcc + warp * 16 * kRow;
  float* wm = red + Sm::kWarpMl + warp * 32;
  float* wl = wm + 16;
  const int t2 = 2 * (lane & 3);
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int col = n * 8 + t2;
    *reinterpret_cast<float2*>(wacc + g8 * kRow + col) = make_float2(w.acc[n][0], w.acc[n][1]);
    *reinterpret_cast<float2*>(wacc + (g8 + 8) * kRow + col) =
        make_float2(w.acc[n][2], w.acc[n][3]);
  }
  if ((lane & 3) == 0) {
    wm[g8] = w.m[0];
    wm[g8 + 8] = w.m[1];
    wl[g8] = w.l[0];
    wl[g8 + 8] = w.l[1];
  }
  __syncthreads();
  // Per head once: the max over the warps, each warp's weight 2^(m_w - M) and the sum.
  float* weight = red + Sm::kWeight;
  float* head_max = red + Sm::kMax;
  float* head_sum = red + Sm::kSum;
  if (threadIdx.x < G) {
    const int h = static_cast<int>(threadIdx.x);
    float M = -INFINITY, L = 0.0f;
    for (int p = 0; p < kWarps; ++p) M = fmaxf(M, red[Sm::kWarpMl + p * 32 + h]);
    for (int p = 0; p < kWarps; ++p) {
      const float f = M == -INFINITY ? 0.0f : exp2f(red[Sm::kWarpMl + p * 32 + h] - M);
      weight[h * kWarps + p] = f;
      L += f * red[Sm::kWarpMl + p * 32 + 16 + h];
    }
    head_max[h] = M;
    head_sum[h] = L;
  }
  __syncthreads();
  if constexpr (kCluster) {
    // The CTAs are this (row, group)'s splits in rank order. Rank q owns output elements
    // [q * share, (q + 1) * share) of the group's G x D: every CTA sends it its unnormalized
    // outputs there and its 16 per-head maxima and sums (those past G unused) by asynchronous
    // 16-byte remote stores counted on q's transaction barrier, straight from the loop that
    // makes them; each owner merges from its own shared memory in rank order (deterministic).
    // No cluster barrier after the loop and no remote loads (ncu at 128K batch 1: merging by
    // remote loads between two cluster barriers took a third of the kernel).
    namespace cg = cooperative_groups;
    const int C = static_cast<int>(cg::this_cluster().num_blocks());
    const int rank = static_cast<int>(cg::this_cluster().block_rank());
    const int share = static_cast<int>(G * D) / C, slot_floats = share + 32;  // share % 4 == 0
    float* box = Mailbox<D>(smem_raw);
    ClusterWait();  // every mailbox initialised (long since, at the kernel's start)
    if (threadIdx.x < C * 8) {
      const int q = threadIdx.x / 8, k = threadIdx.x % 8;
      MailboxPush(box, box + rank * slot_floats + share + 4 * k,
                  *reinterpret_cast<const float4*>((k < 4 ? head_max : head_sum) + 4 * (k % 4)), q);
    }
    for (int e = 4 * static_cast<int>(threadIdx.x); e < G * D; e += 4 * blockDim.x) {
      const int h = e / D, d = e % D;
      float4 O = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int p = 0; p < kWarps; ++p) {
        const float f = weight[h * kWarps + p];
        const float4 v = *reinterpret_cast<const float4*>(red + (p * 16 + h) * kRow + d);
        O.x += f * v.x;
        O.y += f * v.y;
        O.z += f * v.z;
        O.w += f * v.w;
      }
      MailboxPush(box, box + rank * slot_floats + e % share, O, e / share);
    }
    MailboxWait(box, static_cast<uint32_t>(C * slot_floats * sizeof(float)));
    // Ranks in groups of eight (C is 8 or 16: SparseClusterSize), each group's loads issued
    // together: rank by rank, every step waited on its own shared loads (128K batch 1: this merge
    // 1340 -> 950 cycles). Still summed in rank order.
    for (int i = static_cast<int>(threadIdx.x); i < share; i += blockDim.x) {
      const int e = rank * share + i, h = e / D;
      float M = -INFINITY;
      for (int p0 = 0; p0 < C; p0 += 8) {
        float m8[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) m8[q] = box[(p0 + q) * slot_floats + share + h];
#pragma unroll
        for (int q = 0; q < 8; ++q) M = fmaxf(M, m8[q]);
      }
      float L = 0.0f, O = 0.0f;
      if (M != -INFINITY) {
        for (int p0 = 0; p0 < C; p0 += 8) {
          float m8[8], l8[8], o8[8];
#pragma unroll
          for (int q = 0; q < 8; ++q) {
            const float* from = box + (p0 + q) * slot_floats;
            m8[q] = from[share + h];
            l8[q] = from[share + 16 + h];
            o8[q] = from[i];
          }
#pragma unroll
          for (int q = 0; q < 8; ++q) {
            const float f = exp2f(m8[q] - M);
            L += f * l8[q];
            O += f * o8[q];
          }
        }
      }
      a.out[(r * hq + g * G) * D + e] = __float2bfloat16(L > 0.0f ? O / L : 0.0f);
    }
    MailboxRetire(box);
  } else {
    for (int64_t i = threadIdx.x; i < G * D; i += blockDim.x) {
      const int64_t h = i / D, d = i % D;
      float O = 0.0f;
#pragma unroll
      for (int p = 0; p < kWarps; ++p) O += weight[h * kWarps + p] * red[(p * 16 + h) * kRow + d];
      const int64_t head = r * hq + g * G + h;
      if (a.splits == 1) {
        const float L = head_sum[h];
        a.out[head * D + d] = __float2bfloat16(L > 0.0f ? O / L : 0.0f);
      } else {
        a.part[(head * a.splits + c) * D + d] = O;
        if (d == 0) {
          a.ml[(head * a.splits + c) * 2] = head_max[h];
          a.ml[(head * a.splits + c) * 2 + 1] = head_sum[h];
        }
      }
    }
  }
}

// Merges the splits of one (row, q head): out = sum_c 2^(m_c - M) o_c / sum_c 2^(m_c - M) l_c.
// The split weights are made once per head in shared memory by the whole block, and each
// thread's channel sum keeps several partial loads in flight: a batch-1 decode has 32 to 64
// splits, and a split-serial loop of dependent loads took most of the attention's time there.
__global__ void CombineKernel(const float* part, const float* ml, int64_t splits, int64_t dim,
                              bf16* out) {
  ChainedKernelStart();
  extern __shared__ float weight[];  // [splits + 8]
  __shared__ float scratch[32];
  const int64_t head = blockIdx.x;
  const float* m = ml + head * splits * 2;
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < splits; c += blockDim.x) mx = fmaxf(mx, m[2 * c]);
  mx = WarpMax(mx);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = mx;
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) M = fmaxf(M, scratch[w]);
  __syncthreads();  // scratch is reused by BlockSum
  // The unrolled channel loop below may load up to 8 weights past the last split: zeros.
  for (int64_t c = splits + threadIdx.x; c < splits + 8; c += blockDim.x) weight[c] = 0.0f;
  float l = 0.0f;
  for (int64_t c = threadIdx.x; c < splits; c += blockDim.x) {
    const float f = M == -INFINITY ? 0.0f : exp2f(m[2 * c] - M);
    weight[c] = f;
    l += f * m[2 * c + 1];
  }
  const float L = BlockSum(l, scratch);  // its barriers also publish weight[]
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
  const float* p = part + head * splits * dim;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    float O = 0.0f;
#pragma unroll 8
    for (int64_t c = 0; c < splits; ++c) O += weight[c] * p[c * dim + d];
    out[head * dim + d] = __float2bfloat16(O * inv);
  }
}

// The cluster kernel opted in to shared memory and, for more than 8 CTAs, to non-portable
// cluster sizes.
template <int D, bool kSelect = false, bool kFp8 = false>
void PrepareClusterKernel(int cluster) {
  AllowDynamicShared<DecodeKernel<D, true, kSelect, kFp8>>(ClusterSmemBytes<D>());
  if (cluster > 8 &&
      cudaFuncSetAttribute(DecodeKernel<D, true, kSelect, kFp8>,
                           cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("paged decode attention: clusters of " + std::to_string(cluster) +
                             " thread blocks are not available");
  }
}

// How many clusters of `cluster` CTAs of the cluster kernel, each CTA taking `smem` bytes, can be
// resident at once on the current device (0: none, or the query failed).
template <int D, bool kSelect, bool kFp8 = false>
int ActiveClusters(int cluster, size_t smem) {
  int active = 0;
  try {
    PrepareClusterKernel<D, kSelect, kFp8>(cluster);
    AllowDynamicShared<DecodeKernel<D, true, kSelect, kFp8>>(smem);
    const ChainedLaunch launch(dim3(1, 1, cluster), dim3(1, 1, cluster), kWarps * 32, smem,
                               nullptr);
    if (cudaOccupancyMaxActiveClusters(&active, DecodeKernel<D, true, kSelect, kFp8>,
                                       &launch.config) != cudaSuccess)
      active = 0;
  } catch (const std::runtime_error&) {
    active = 0;
  }
  cudaGetLastError();
  return active;
}

// Whether clusters of 16 CTAs (non-portable; H100: yes) can be resident on this device, asked
// once per device.
bool Clusters16Fit() {
  constexpr int kDevices = 64;
  static std::atomic<int> cached[kDevices] = {};  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDevices) return false;
  if (const int known = cached[dev].load(std::memory_order_relaxed)) return known == 2;
  const bool fits = ActiveClusters<128, false>(16, ClusterSmemBytes<128>()) > 0 &&
                    ActiveClusters<128, true>(16, ClusterSmemBytes<128>()) > 0;
  cached[dev].store(fits ? 2 : 1, std::memory_order_relaxed);
  return fits;
}

// Sparse decode rows merge their splits in clusters of 16 when the (row, group) pairs are few
// enough for all of them to run in one wave (batch 1 and 2 at the real shapes). H100, 128K,
// batch 1 (top-16 of 128-key blocks, 4 groups): split partials + combine 11.0 us, clusters of 8
// 11.8 us, of 16 9.3 us when clusters merged by remote loads; 6.8 us through mailboxes.
// M3_SPARSE_DECODE_CLUSTER=0|8|16 forces it (the tests run each).
int SparseClusterSize(int64_t pairs) {
  if (const char* env = std::getenv("M3_SPARSE_DECODE_CLUSTER")) {
    const int forced = std::atoi(env);
    if (forced == 0 || forced == 8 || (forced == 16 && Clusters16Fit())) return forced;
  }
  return pairs * 16 <= SmCount() && Clusters16Fit() ? 16 : 0;
}

// A cluster CTA has an SM to itself where all the launch's clusters fit that way: its shared
// memory is raised past half an SM's. At its own 106 KB two CTAs fit an SM, and after a bf16
// index scan one cluster of the four at batch 1 landed two to an SM in nearly every call (their
// `%smid`s): their K/V copies and attention, bound by one SM's latencies rather than by HBM
// ("The selecting attention phase by phase" in docs/perf-log/msa-decode.md), then held up the
// cluster's merge. H100, 128K batch 1, no data in L2, bf16 index keys: scan + selecting attention
// chained 20.6-20.7 -> 20.0-20.1 us, in a step's order (after the key write) 23.3-23.5 -> 21.9-22.0
// us. FP8 index keys unchanged: their scan blocks (50 KB, two an SM) leave room for one attention
// CTA either way.
template <int D, bool kSelect, bool kFp8>
size_t ClusterLaunchSmem(int64_t clusters, int cluster) {
  constexpr size_t own = ClusterSmemBytes<D>();
  constexpr int kDevices = 64;
  struct Alone {
    size_t smem = 0;   // past half an SM's shared memory
    int clusters = 0;  // of `cluster` CTAs resident at once with it (0: never alone)
  };
  static std::once_flag once[kDevices][2];  // clusters of 8 / 16
  static Alone alone[kDevices][2];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDevices) {
    cudaGetLastError();
    return own;
  }
  const int c = cluster > 8 ? 1 : 0;
  std::call_once(once[dev][c], [&] {
    int per_sm = 0;
    if (cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) !=
        cudaSuccess) {
      cudaGetLastError();
      return;
    }
    const size_t smem = (static_cast<size_t>(per_sm) / 2 + 16) & ~size_t{15};
    if (smem > own) alone[dev][c] = {smem, ActiveClusters<D, kSelect, kFp8>(cluster, smem)};
  });
  return clusters <= alone[dev][c].clusters ? alone[dev][c].smem : own;
}

template <int D, bool kSelect, bool kFp8>
void LaunchClusters(const Args& a, dim3 grid, int cluster, cudaStream_t stream) {
  PrepareClusterKernel<D, kSelect, kFp8>(cluster);
  const int64_t clusters = int64_t{grid.x} * grid.y * grid.z / cluster;
  LaunchClustersAfterPrior(DecodeKernel<D, true, kSelect, kFp8>, grid, dim3(1, 1, cluster),
                           kWarps * 32, ClusterLaunchSmem<D, kSelect, kFp8>(clusters, cluster),
                           stream, a);
}

template <int D, bool kFp8>
void Launch(const Args& a, int64_t num_decodes, int cluster, cudaStream_t stream) {
  constexpr size_t smem = SmemBytes<D>();
  static_assert(smem >= MergeSmem<D>::kFloats * sizeof(float), "merge space");
  const dim3 grid(static_cast<unsigned>(num_decodes), static_cast<unsigned>(a.dims.num_kv_heads),
                  static_cast<unsigned>(a.splits));
  if (cluster > 0) {
    if (a.scores != nullptr)
      LaunchClusters<D, true, kFp8>(a, grid, cluster, stream);
    else
      LaunchClusters<D, false, kFp8>(a, grid, cluster, stream);
    return;
  }
  AllowDynamicShared<DecodeKernel<D, false, false, kFp8>>(smem);
  LaunchAfterPrior(DecodeKernel<D, false, false, kFp8>, grid, kWarps * 32, smem, stream, a);
  if (a.splits > 1) {
    LaunchAfterPrior(CombineKernel, static_cast<unsigned>(num_decodes * a.dims.num_q_heads), D,
                     (a.splits + 8) * sizeof(float), stream, a.part, a.ml, a.splits, D, a.out);
  }
}

}  // namespace

bool TensorCoreAttentionSupported(const AttentionDims& dims) {
  if (dims.num_kv_heads <= 0 || dims.num_q_heads % dims.num_kv_heads != 0) return false;
  const int64_t G = dims.num_q_heads / dims.num_kv_heads;
  return (dims.head_dim == 64 || dims.head_dim == 128) && G >= 1 && G <= 16;
}

DecodePlan PlanDecode(int64_t num_decodes, int64_t max_keys, const AttentionDims& dims,
                      int64_t topk) {
  const int64_t ctas = std::max<int64_t>(1, num_decodes * dims.num_kv_heads);
  // Sparse: the split count only (the launch sizes the splits from the block size): a cluster
  // per (row, group) where they are few (SparseClusterSize), else about one CTA per SM, at most
  // two per selected block (at batch 32 one CTA streams all 16 blocks of a row's group). A
  // second CTA per SM costs more in partials and their combine than it hides (H100, 128K,
  // batch 32: 1 split 57 us, 2 splits 61 us, 4 splits 69 us).
  if (topk > 0) {
    if (const int cluster = SparseClusterSize(ctas)) return {cluster, 0, cluster};
    return {std::min(std::max<int64_t>(1, SmCount() / ctas), 2 * topk), 0, 0};
  }
  // Dense: one wave of two CTAs per SM (each holds 96 KiB of tiles) over the whole grid, in
  // whole pipeline rounds; more rows than that keep one split.
  const int64_t want = std::max<int64_t>(1, 2 * SmCount() / ctas);
  const int64_t rounds = std::max<int64_t>(1, (max_keys + kRound - 1) / kRound);
  const int64_t per = (rounds + std::min(want, rounds) - 1) / std::min(want, rounds);
  const int64_t chunk = per * kRound;
  return {(std::max<int64_t>(max_keys, 1) + chunk - 1) / chunk, chunk, 0};
}

bool DecodeSelectsBlocks(const DecodePlan& plan, int64_t max_blocks, int64_t head_dim) {
  return plan.cluster > 0 && max_blocks > 0 && max_blocks <= SelectKeyCapacity(head_dim);
}

size_t DecodeWorkspaceBytes(const DecodePlan& plan, int64_t num_decodes,
                            const AttentionDims& dims) {
  if (plan.splits <= 1 || plan.cluster > 0) return 0;
  return static_cast<size_t>(num_decodes * dims.num_q_heads * plan.splits * (dims.head_dim + 2)) *
         sizeof(float);
}

void PagedDecodeAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                          int64_t num_decodes, const AttentionDims& dims, const int32_t* selected,
                          int64_t topk, int64_t block_size, const DecodePlan& plan,
                          float* workspace, bf16* out, cudaStream_t stream,
                          const DecodeBlockScores* select) {
  if (num_decodes <= 0) return;
  if (select != nullptr) {
    if (!DecodeSelectsBlocks(plan, select->max_blocks, dims.head_dim) || topk <= 0)
      throw std::runtime_error("paged decode attention: selecting from " +
                               std::to_string(select->max_blocks) +
                               " block scores needs a cluster plan, top-k > 0 and at most " +
                               std::to_string(SelectKeyCapacity(dims.head_dim)) + " blocks");
    selected = select->selected;
  }
  if (selected != nullptr && (topk > kMaxSparseTopk || block_size <= 0))
    throw std::runtime_error("paged decode attention: top-k of " + std::to_string(topk) +
                             " blocks of " + std::to_string(block_size) +
                             " keys is not supported (at most 64 blocks)");
  if (plan.cluster > 0 && (selected == nullptr || plan.splits != plan.cluster))
    throw std::runtime_error("paged decode attention: a cluster plan is for sparse rows only");
  if (plan.cluster != 0 && plan.cluster != 8 && plan.cluster != 16)
    throw std::runtime_error("paged decode attention: clusters of " + std::to_string(plan.cluster) +
                             " thread blocks (8 or 16 only)");
  DecodePlan p = plan;
  if (selected != nullptr) {
    // The planned split count over topk * block_size virtual keys, in whole rounds; never more
    // splits than planned (the workspace was sized for those). A cluster keeps all of its CTAs
    // (any past the keys have nothing to attend).
    const int64_t total = topk * block_size;
    const int64_t rounds = (total + kRound - 1) / kRound;
    const int64_t per =
        (rounds + std::min(plan.splits, rounds) - 1) / std::min(plan.splits, rounds);
    p.chunk = per * kRound;
    p.splits = plan.cluster > 0 ? plan.cluster : (total + p.chunk - 1) / p.chunk;
  }
  const int64_t parts = num_decodes * dims.num_q_heads * p.splits;
  Args a{q,
         kv.k,
         kv.v,
         layout,
         dims,
         selected,
         topk,
         block_size,
         select ? select->scores : nullptr,
         select ? select->max_blocks : 0,
         select ? select->local_blocks : 0,
         select ? select->selected : nullptr,
         p.chunk,
         p.splits,
         dims.scale * attn::kLog2e,
         workspace,
         workspace ? workspace + parts * dims.head_dim : nullptr,
         out,
         kv.k_scales,
         kv.v_scales};
  const int cluster = static_cast<int>(p.cluster);
  if (dims.head_dim == 128)
    kv.fp8() ? Launch<128, true>(a, num_decodes, cluster, stream)
             : Launch<128, false>(a, num_decodes, cluster, stream);
  else
    kv.fp8() ? Launch<64, true>(a, num_decodes, cluster, stream)
             : Launch<64, false>(a, num_decodes, cluster, stream);
}

}  // namespace m3::kernels::cuda
