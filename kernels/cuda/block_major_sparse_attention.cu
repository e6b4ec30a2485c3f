// Key-block-major MSA prefill. Per pass of rows: an inverted index (count the (row, slot)
// selections of each (KV group, sequence, block) bucket, scan, scatter), then one CTA per
// (bucket, chunk of the rows that chose it) stages the block's keys once and runs each of its
// rows' 16-row M tiles over them, leaving per (row, slot) a bf16 partial normalized by its own
// sum and an f32 log-sum-exp; a merge CTA per (row, KV group) weighs a row's partials in slot
// order. The index is built with atomics, so the order of rows within a bucket varies from run
// to run; no result depends on it (each M row of an MMA is computed on its own, and the merge
// order is the slot order), so the output is deterministic.
#include "kernels/cuda/block_major_sparse_attention.cuh"

#include <algorithm>

#include "kernels/cuda/attention_tile.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kBN = 64;  // keys per AttendTile call
// M tiles each warp of a CTA takes: the rows of a chunk share one staging of the key block
// (H100, 128K prefill: 4 per warp 72.7 ms, 8 66.8 ms, 16 64.0 ms).
constexpr int kItemsPerWarp = 16;
constexpr size_t kMaxBlockSmem = 96 * 1024;
constexpr int kScanThreads = 1024;
constexpr int kMaxMergeTopk = 64;

size_t BlockSmem(int64_t head_dim, int64_t block_size) {
  const int64_t keys = (block_size + kBN - 1) / kBN * kBN;
  return static_cast<size_t>(keys * head_dim * 2) * sizeof(bf16);
}

struct Pass {
  const bf16* q;
  const void* k;  // bf16 values, or FP8 codes (k_scales set)
  const void* v;
  PagedLayout layout;
  AttentionDims dims;
  const int32_t* selected;
  int64_t topk, bs;
  int64_t r0, nrows;  // the rows of this pass
  int64_t s0, nseq;   // sequences the rows may belong to
  int64_t nblk;       // block ids per sequence
  int rpw;            // rows per M tile: 16 / (q heads per group)
  float scale_log2;
  int32_t* count;      // [buckets]
  int32_t* offset;     // [buckets + 1]: first list entry of each bucket
  int32_t* chunk_off;  // [buckets + 1]: first CTA of each bucket
  int32_t* rank;       // [entries]: place in its bucket, -1 when the slot is ignored
  int32_t* list;       // [entries]: row_in_pass * topk + slot, grouped by bucket
  bf16* part;          // [entries, G, D]
  float* lse;          // [entries, G], log2 domain
  bf16* out;
  const float* k_scales;  // FP8 pages' scales (KvPages)
  const float* v_scales;

  __host__ __device__ int64_t Buckets() const { return dims.num_kv_heads * nseq * nblk; }
  __host__ __device__ int64_t Entries() const { return dims.num_kv_heads * nrows * topk; }
  __host__ __device__ int RowsPerChunk() const { return kWarps * kItemsPerWarp * rpw; }
};

// Entry e = (g * nrows + row_in_pass) * topk + slot.
__device__ __forceinline__ int64_t Bucket(const Pass& p, int64_t g, int64_t s, int64_t b) {
  return (g * p.nseq + (s - p.s0)) * p.nblk + b;
}

// The block of a selection, or -1 when it is ignored (attn::SelectedBlock).
__device__ __forceinline__ int SelectedBlock(const Pass& p, int64_t g, int64_t row, int64_t slot,
                                             int64_t pos) {
  return attn::SelectedBlock(p.selected + (g * p.layout.rows + row) * p.topk, slot, pos, p.bs);
}

struct EntryOf {
  int64_t g, row_in_pass, slot;
  __device__ EntryOf(const Pass& p, int64_t e)
      : g(e / (p.topk * p.nrows)), row_in_pass((e / p.topk) % p.nrows), slot(e % p.topk) {}
};

__global__ void CountKernel(Pass p) {
  const int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e >= p.Entries()) return;
  const EntryOf x(p, e);
  const int64_t row = p.r0 + x.row_in_pass, s = p.layout.SeqOf(row);
  const int b = SelectedBlock(p, x.g, row, x.slot, p.layout.PositionOf(s, row));
  p.rank[e] = b < 0 ? -1 : atomicAdd(p.count + Bucket(p, x.g, s, b), 1);
}

// Exclusive scans of the bucket sizes and of their chunk counts, one CTA: each thread sums a
// contiguous range, the CTA scans the sums, each thread writes its range.
__global__ void __launch_bounds__(kScanThreads) ScanKernel(Pass p) {
  __shared__ int32_t warp_sums[2][kScanThreads / 32];
  const int64_t n = p.Buckets(), per = (n + kScanThreads - 1) / kScanThreads;
  const int64_t b0 = min(n, int64_t{threadIdx.x} * per), b1 = min(n, b0 + per);
  const int rpc = p.RowsPerChunk();
  int32_t sum = 0, csum = 0;
  for (int64_t i = b0; i < b1; ++i) {
    const int32_t c = p.count[i];
    sum += c;
    csum += (c + rpc - 1) / rpc;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int32_t x = sum, y = csum;  // inclusive scans within the warp
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t tx = __shfl_up_sync(0xffffffffu, x, o), ty = __shfl_up_sync(0xffffffffu, y, o);
    if (lane >= o) {
      x += tx;
      y += ty;
    }
  }
  if (lane == 31) {
    warp_sums[0][warp] = x;
    warp_sums[1][warp] = y;
  }
  __syncthreads();
  if (warp == 0) {
    int32_t wx = warp_sums[0][lane], wy = warp_sums[1][lane];
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t tx = __shfl_up_sync(0xffffffffu, wx, o),
                    ty = __shfl_up_sync(0xffffffffu, wy, o);
      if (lane >= o) {
        wx += tx;
        wy += ty;
      }
    }
    warp_sums[0][lane] = wx;
    warp_sums[1][lane] = wy;
  }
  __syncthreads();
  int32_t base = x - sum + (warp > 0 ? warp_sums[0][warp - 1] : 0);
  int32_t cbase = y - csum + (warp > 0 ? warp_sums[1][warp - 1] : 0);
  for (int64_t i = b0; i < b1; ++i) {
    const int32_t c = p.count[i];
    p.offset[i] = base;
    p.chunk_off[i] = cbase;
    base += c;
    cbase += (c + rpc - 1) / rpc;
  }
  if (threadIdx.x == kScanThreads - 1) {
    p.offset[n] = base;
    p.chunk_off[n] = cbase;
  }
}

__global__ void ScatterKernel(Pass p) {
  const int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e >= p.Entries()) return;
  const int32_t r = p.rank[e];
  if (r < 0) return;
  const EntryOf x(p, e);
  const int64_t row = p.r0 + x.row_in_pass, s = p.layout.SeqOf(row);
  const int64_t b = p.selected[(x.g * p.layout.rows + row) * p.topk + x.slot];
  p.list[p.offset[Bucket(p, x.g, s, b)] + r] =
      static_cast<int32_t>(x.row_in_pass * p.topk + x.slot);
}

// kFp8: FP8 K/V pages (kv_cache_fp8.cuh).
template <int D, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32) AttendKernel(Pass p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int64_t nb = p.Buckets();
  const int32_t cta = static_cast<int32_t>(blockIdx.x);
  if (cta >= p.chunk_off[nb]) return;
  int64_t lo = 0, hi = nb;  // chunk_off[lo] <= cta < chunk_off[hi]
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (p.chunk_off[mid] <= cta)
      lo = mid;
    else
      hi = mid;
  }
  const int64_t u = lo;
  const int64_t g = u / (p.nseq * p.nblk), s = p.s0 + (u / p.nblk) % p.nseq, b = u % p.nblk;
  const int rpc = p.RowsPerChunk();
  const int64_t first = p.offset[u] + int64_t{cta - p.chunk_off[u]} * rpc;
  const int n_here = static_cast<int>(min(int64_t{rpc}, p.offset[u + 1] - first));
  const int64_t hq = p.dims.num_q_heads, hkv = p.dims.num_kv_heads, G = hq / hkv;

  // The block's keys this step has written, staged once for every row of the chunk.
  const int64_t last_row = p.layout.query_start[s + 1] - 1;
  const int64_t j0 = b * p.bs, j1 = min(j0 + p.bs, p.layout.PositionOf(s, last_row) + 1);
  const int nsub = static_cast<int>((p.bs + kBN - 1) / kBN);
  bf16* sk = reinterpret_cast<bf16*>(smem_raw);
  bf16* sv = sk + nsub * kBN * D;
  constexpr int kChunks = D / 8;
  const int64_t stride = hkv * D;
  const bf16* kg = static_cast<const bf16*>(p.k) + g * D;
  const bf16* vg = static_cast<const bf16*>(p.v) + g * D;
  const attn::Fp8GroupKv fp8(p.k, p.v, p.k_scales, p.v_scales, g, hkv, D);
  for (int i = threadIdx.x; i < nsub * kBN * kChunks; i += kWarps * 32) {
    const int key = i / kChunks, ch = i % kChunks;
    const int64_t j = j0 + key;
    const bool ok = j < j1;
    if constexpr (kFp8) {
      const int o = attn::TileOffset<D>(key, ch);
      fp8.Stage(sk + o, sv + o, ok ? p.layout.Slot(s, j) : 0, ch, ok);
    } else {
      const int64_t off = ok ? p.layout.Slot(s, j) * stride + ch * 8 : 0;
      attn::CpAsync16(sk + attn::TileOffset<D>(key, ch), kg + off, ok);
      attn::CpAsync16(sv + attn::TileOffset<D>(key, ch), vg + off, ok);
    }
  }
  __shared__ int32_t chunk_rows[kWarps * kItemsPerWarp * 16];
  for (int i = threadIdx.x; i < n_here; i += kWarps * 32) chunk_rows[i] = p.list[first + i];
  attn::CpAsyncCommit();
  attn::CpAsyncWait<0>();
  if constexpr (kFp8)
    attn::DequantTiles<D>(sk, sv, static_cast<int>(threadIdx.x), kWarps * 32, nsub * kBN);
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g8 = lane >> 2;
  const int t2 = 2 * (lane & 3);
  const int items = (n_here + p.rpw - 1) / p.rpw;
  const int64_t ctx = p.layout.context_lens[s], qs = p.layout.query_start[s];
  // The M rows of item `it` (rows it * rpw ... of the chunk, q heads of group g).
  struct Item {
    int64_t pos[2], e[2];
    int head[2];
    const bf16* qp[2];
  };
  auto item = [&](int it) {
    Item r;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int mr = g8 + 8 * h, k = it * p.rpw + mr / static_cast<int>(G);
      r.pos[h] = -1;
      r.e[h] = -1;
      r.head[h] = mr % static_cast<int>(G);
      r.qp[h] = nullptr;
      if (it < items && mr < p.rpw * G && k < n_here) {
        const int32_t v = chunk_rows[k];
        const int64_t rin = v / p.topk, row = p.r0 + rin;
        r.pos[h] = ctx + (row - qs);
        r.e[h] = (g * p.nrows + rin) * p.topk + v % p.topk;
        r.qp[h] = p.q + (row * hq + g * G + r.head[h]) * D;
      }
    }
    return r;
  };
  // The next item's queries are loaded while this one computes.
  Item cur = item(warp);
  uint32_t q_next[D / 16][4];
  attn::LoadQ<D>(q_next, cur.qp[0], cur.qp[1], lane);
  for (int it = warp; it < items; it += kWarps) {
    attn::WarpState<D> w;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) w.q[ks][i] = q_next[ks][i];
    attn::ResetState<D>(w);
    const Item next = item(it + kWarps);
    attn::LoadQ<D>(q_next, next.qp[0], next.qp[1], lane);
    for (int t = 0; t < nsub; ++t) {
      const int64_t t0 = j0 + int64_t{t} * kBN;
      if (t0 >= j1) break;
      int lim[2];
#pragma unroll
      for (int h = 0; h < 2; ++h)
        lim[h] = static_cast<int>(max(int64_t{0}, min(j1, cur.pos[h] + 1) - t0));
      attn::AttendTile<D, kBN>(
          w, sk + t * kBN * D, sv + t * kBN * D, p.scale_log2,
          [&](int h, int key) { return key < lim[h]; }, lane);
    }
    attn::FinishRowSums<D>(w);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t e = cur.e[h];
      if (e < 0) continue;
      bf16* o = p.part + (e * G + cur.head[h]) * D;
      const float inv = w.l[h] > 0.0f ? 1.0f / w.l[h] : 0.0f;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<uint32_t*>(o + n * 8 + t2) =
            attn::PackBf16(w.acc[n][2 * h] * inv, w.acc[n][2 * h + 1] * inv);
      if ((lane & 3) == 0)
        p.lse[e * G + cur.head[h]] = w.l[h] > 0.0f ? w.m[h] + log2f(w.l[h]) : -INFINITY;
    }
    cur = next;
  }
}

// One CTA per (row, KV group), a thread per (q head, 8 channels).
template <int D>
__global__ void MergeKernel(Pass p) {
  __shared__ bool used[kMaxMergeTopk];
  const int64_t rin = blockIdx.x, g = blockIdx.y, row = p.r0 + rin;
  const int64_t hq = p.dims.num_q_heads, G = hq / p.dims.num_kv_heads;
  const int64_t s = p.layout.SeqOf(row), pos = p.layout.PositionOf(s, row);
  for (int64_t slot = threadIdx.x; slot < p.topk; slot += blockDim.x)
    used[slot] = SelectedBlock(p, g, row, slot, pos) >= 0;
  __syncthreads();
  const int head = threadIdx.x / (D / 8), c = threadIdx.x % (D / 8);
  const int64_t e0 = (g * p.nrows + rin) * p.topk;
  float mx = -INFINITY;
  for (int64_t slot = 0; slot < p.topk; ++slot)
    if (used[slot]) mx = fmaxf(mx, p.lse[(e0 + slot) * G + head]);
  float acc[8] = {};
  float den = 0.0f;
  if (mx > -INFINITY) {
    for (int64_t slot = 0; slot < p.topk; ++slot) {
      if (!used[slot]) continue;
      const float wgt = exp2f(p.lse[(e0 + slot) * G + head] - mx);
      den += wgt;
      const uint4 raw =
          *reinterpret_cast<const uint4*>(p.part + ((e0 + slot) * G + head) * D + c * 8);
      const bf16* x = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += wgt * __bfloat162float(x[i]);
    }
  }
  const float inv = den > 0.0f ? 1.0f / den : 0.0f;
  uint32_t* o = reinterpret_cast<uint32_t*>(p.out + (row * hq + g * G + head) * D + c * 8);
#pragma unroll
  for (int i = 0; i < 4; ++i) o[i] = attn::PackBf16(acc[2 * i] * inv, acc[2 * i + 1] * inv);
}

template <int D, bool kFp8>
void RunPass(const Pass& p, cudaStream_t stream) {
  const int64_t entries = p.Entries(), nb = p.Buckets();
  cudaMemsetAsync(p.count, 0, static_cast<size_t>(nb) * sizeof(int32_t), stream);
  CountKernel<<<Blocks(entries, 256), 256, 0, stream>>>(p);
  ScanKernel<<<1, kScanThreads, 0, stream>>>(p);
  ScatterKernel<<<Blocks(entries, 256), 256, 0, stream>>>(p);
  // Chunks: sum over buckets of ceil(size / rpc) <= entries / rpc + non-empty buckets; the
  // CTAs past the real count return at once.
  const int64_t ctas = entries / p.RowsPerChunk() + std::min(nb, entries) + 1;
  const size_t smem = BlockSmem(D, p.bs);
  AllowDynamicShared<AttendKernel<D, kFp8>>(smem);
  AttendKernel<D, kFp8><<<static_cast<unsigned>(ctas), kWarps * 32, smem, stream>>>(p);
  const dim3 merge_grid(static_cast<unsigned>(p.nrows), static_cast<unsigned>(p.dims.num_kv_heads));
  const int G = static_cast<int>(p.dims.num_q_heads / p.dims.num_kv_heads);
  MergeKernel<D><<<merge_grid, G*(D / 8), 0, stream>>>(p);
}

size_t AlignUp(size_t n) {
  return (n + 255) & ~size_t{255};
}

}  // namespace

bool BlockMajorSparseAttentionSupported(const AttentionDims& dims, int64_t block_size) {
  if (dims.head_dim != 64 && dims.head_dim != 128) return false;
  if (dims.num_kv_heads <= 0 || dims.num_q_heads % dims.num_kv_heads != 0) return false;
  if (dims.num_q_heads / dims.num_kv_heads > 16) return false;
  return block_size > 0 && BlockSmem(dims.head_dim, block_size) <= kMaxBlockSmem;
}

bool BlockMajorSparseAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                               int64_t row_begin, const AttentionDims& dims,
                               const int32_t* selected, int64_t topk, int64_t block_size, bf16* out,
                               cudaStream_t stream, size_t scratch_budget) {
  if (layout.rows <= row_begin) return true;
  if (!BlockMajorSparseAttentionSupported(dims, block_size) || topk <= 0 || topk > kMaxMergeTopk)
    return false;
  const int64_t hkv = dims.num_kv_heads, G = dims.num_q_heads / hkv, D = dims.head_dim;
  Pass p{};
  p.q = q;
  p.k = kv.k;
  p.v = kv.v;
  p.k_scales = kv.k_scales;
  p.v_scales = kv.v_scales;
  p.layout = layout;
  p.dims = dims;
  p.selected = selected;
  p.topk = topk;
  p.bs = block_size;
  // Rows [0, num_decodes) are one-row sequences, so the rows from there on start at sequence
  // num_decodes; otherwise any sequence may own them.
  p.s0 = row_begin == layout.num_decodes ? layout.num_decodes : 0;
  p.nseq = layout.seqs - p.s0;
  p.nblk = (layout.max_pages * layout.page_size + block_size - 1) / block_size;
  p.rpw = static_cast<int>(16 / G);
  p.scale_log2 = dims.scale * attn::kLog2e;
  p.out = out;

  const int64_t nb = p.Buckets();
  const size_t fixed =
      AlignUp(static_cast<size_t>(nb) * 4) + 2 * AlignUp(static_cast<size_t>(nb + 1) * 4);
  const size_t per_entry = static_cast<size_t>(2 * 4 + G * D * 2 + G * 4);
  const size_t per_row = static_cast<size_t>(hkv * topk) * per_entry;
  const int64_t total_rows = layout.rows - row_begin;
  if (scratch_budget < fixed + per_row + 4 * 256) return false;
  const int64_t pass_rows = std::min<int64_t>(
      total_rows, static_cast<int64_t>((scratch_budget - fixed - 4 * 256) / per_row));
  const size_t n_entries = static_cast<size_t>(hkv * pass_rows * topk);
  const size_t bytes = fixed + AlignUp(n_entries * 4) * 2 + AlignUp(n_entries * G * D * 2) +
                       AlignUp(n_entries * G * 4);
  unsigned char* scratch = nullptr;
  if (cudaMallocAsync(reinterpret_cast<void**>(&scratch), bytes, stream) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it, the caller takes the query-major kernel
    return false;
  }
  unsigned char* at = scratch;
  auto take = [&](size_t n) {
    unsigned char* r = at;
    at += AlignUp(n);
    return r;
  };
  p.count = reinterpret_cast<int32_t*>(take(static_cast<size_t>(nb) * 4));
  p.offset = reinterpret_cast<int32_t*>(take(static_cast<size_t>(nb + 1) * 4));
  p.chunk_off = reinterpret_cast<int32_t*>(take(static_cast<size_t>(nb + 1) * 4));
  p.rank = reinterpret_cast<int32_t*>(take(n_entries * 4));
  p.list = reinterpret_cast<int32_t*>(take(n_entries * 4));
  p.part = reinterpret_cast<bf16*>(take(n_entries * G * D * 2));
  p.lse = reinterpret_cast<float*>(take(n_entries * G * 4));
  for (int64_t r0 = row_begin; r0 < layout.rows; r0 += pass_rows) {
    p.r0 = r0;
    p.nrows = std::min(pass_rows, layout.rows - r0);
    if (D == 128)
      kv.fp8() ? RunPass<128, true>(p, stream) : RunPass<128, false>(p, stream);
    else
      kv.fp8() ? RunPass<64, true>(p, stream) : RunPass<64, false>(p, stream);
  }
  cudaFreeAsync(scratch, stream);
  return true;
}

}  // namespace m3::kernels::cuda
