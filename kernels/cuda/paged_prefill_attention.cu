// Prefill attention on tensor cores: a CTA of four warps owns R consecutive rows (R = 4 x rows per
// warp; a warp's 16 M rows are rows_per_warp rows x the group's q heads) of one KV group. For
// each sequence among its rows it builds the list of 64-key tiles to visit (dense: up to its last
// row's position; sparse: the union of its rows' selected blocks with a bit mask of the rows
// that chose each block, built deterministically in shared memory), stages K/V tiles through a
// two-stage cp.async pipeline shared by the warps, and lets each warp skip tiles none of its
// rows may see (causal or unselected).
#include "kernels/cuda/paged_prefill_attention.cuh"

#include <algorithm>

#include "kernels/cuda/attention_tile.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kBN = 64;
constexpr int kMaxRowsPerCta = 32;  // rows of a CTA are bits of one 32-bit mask
constexpr int kMaxTopk = 64;        // paged_attention.cu sends larger topk to the reference

template <int D>
__host__ __device__ constexpr size_t TileBytes() {
  return size_t{2} * 2 * kBN * D * sizeof(bf16);
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
  int64_t row_begin;
  int rows_per_warp;
  float scale_log2;
  bf16* out;
  const float* k_scales;  // FP8 pages' scales (KvPages)
  const float* v_scales;
};

// kFp8: FP8 K/V pages (kv_cache_fp8.cuh).
template <int D, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32) PrefillKernel(Args a) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ int n_union;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t hq = a.dims.num_q_heads, hkv = a.dims.num_kv_heads, G = hq / hkv;
  const int64_t rows = a.layout.rows;
  const int rpw = a.rows_per_warp, R = kWarps * rpw;
  const int64_t r0 = a.row_begin + int64_t{blockIdx.x} * R, r1 = min(r0 + R, rows);
  const int64_t g = blockIdx.y;
  const bool sparse = a.selected != nullptr;
  const int E = sparse ? R * static_cast<int>(a.topk) : 0;
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
  int* ent = reinterpret_cast<int*>(smem_raw + TileBytes<D>());
  uint32_t* emask = reinterpret_cast<uint32_t*>(ent + E);
  int* ublock = reinterpret_cast<int*>(emask + E);
  uint32_t* umask = reinterpret_cast<uint32_t*>(ublock + E);

  // This thread's two M rows (g8 and g8 + 8 of the warp's 16).
  const int g8 = lane >> 2;
  int64_t row[2], pos[2], seq[2];
  int rl[2];
  const bf16* qp[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int mr = g8 + 8 * h;
    rl[h] = warp * rpw + mr / static_cast<int>(G);
    row[h] = r0 + rl[h];
    seq[h] = -1;
    pos[h] = -1;
    qp[h] = nullptr;
    if (mr < rpw * G && row[h] < r1) {
      seq[h] = a.layout.SeqOf(row[h]);
      pos[h] = a.layout.PositionOf(seq[h], row[h]);
      qp[h] = a.q + (row[h] * hq + g * G + mr % G) * D;
    }
  }
  attn::WarpState<D> w;
  attn::InitState<D>(w, qp[0], qp[1], lane);

  const int64_t stride = hkv * D;
  const bf16* kg = static_cast<const bf16*>(a.k) + g * D;
  const bf16* vg = static_cast<const bf16*>(a.v) + g * D;
  const attn::Fp8GroupKv fp8(a.k, a.v, a.k_scales, a.v_scales, g, hkv, D);
  const int64_t bs = a.block_size;
  const int64_t nsub = sparse ? (bs + kBN - 1) / kBN : 1;
  const int64_t s_first = a.layout.SeqOf(r0), s_last = a.layout.SeqOf(r1 - 1);
  for (int64_t s = s_first; s <= s_last; ++s) {
    const int64_t rs0 = max(r0, int64_t{a.layout.query_start[s]});
    const int64_t rs1 = min(r1, int64_t{a.layout.query_start[s + 1]});
    if (rs1 <= rs0) continue;
    const int64_t kend = a.layout.PositionOf(s, rs1 - 1) + 1;
    int64_t wmax = -1;
    uint32_t wbits = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (seq[h] == s) {
        wmax = max(wmax, pos[h]);
        wbits |= 1u << rl[h];
      }
    for (int o = 16; o > 0; o >>= 1) {
      wmax = max(wmax, static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, wmax, o)));
      wbits |= __shfl_xor_sync(0xffffffffu, wbits, o);
    }

    int64_t ntiles = 0;
    if (sparse) {
      // Entries (row, slot) -> block, -1 when empty, beyond the row's position or repeated.
      for (int e = threadIdx.x; e < E; e += blockDim.x) {
        const int64_t rr = r0 + e / a.topk, kk = e % a.topk;
        ent[e] = rr >= rs0 && rr < rs1 ? attn::SelectedBlock(a.selected + (g * rows + rr) * a.topk,
                                                             kk, a.layout.PositionOf(s, rr), bs)
                                       : -1;
      }
      __syncthreads();
      // The first entry of each block carries the mask of all rows that chose it.
      for (int e = threadIdx.x; e < E; e += blockDim.x) {
        const int b = ent[e];
        uint32_t m = 0;
        if (b >= 0) {
          for (int e2 = 0; e2 < E; ++e2) {
            if (ent[e2] != b) continue;
            if (e2 < e) {
              m = 0;
              break;
            }
            m |= 1u << (e2 / a.topk);
          }
        }
        emask[e] = m;
      }
      __syncthreads();
      if (warp == 0) {
        int count = 0;
        for (int base = 0; base < E; base += 32) {
          const int e = base + lane;
          const bool first = e < E && emask[e] != 0;
          const unsigned bal = __ballot_sync(0xffffffffu, first);
          if (first) {
            const int u = count + __popc(bal & ((1u << lane) - 1u));
            ublock[u] = ent[e];
            umask[u] = emask[e];
          }
          count += __popc(bal);
        }
        if (lane == 0) n_union = count;
      }
      __syncthreads();
      ntiles = n_union * nsub;
    } else {
      ntiles = (kend + kBN - 1) / kBN;
    }

    auto tile = [&](int64_t t, int64_t& j0, int64_t& j1, uint32_t& bits) {
      if (!sparse) {
        j0 = t * kBN;
        j1 = min(j0 + kBN, kend);
        bits = ~0u;
      } else {
        const int64_t u = t / nsub, b0 = int64_t{ublock[u]} * bs;
        j0 = b0 + (t % nsub) * kBN;
        j1 = min(min(j0 + kBN, b0 + bs), kend);
        bits = umask[u];
      }
    };
    auto load = [&](int64_t t, int st) {
      int64_t j0, j1;
      uint32_t bits;
      tile(t, j0, j1, bits);
      bf16* sk = tiles + st * 2 * kBN * D;
      bf16* sv = sk + kBN * D;
      constexpr int kChunks = D / 8, kKeysPerPass = kWarps * 32 / kChunks;
      // The warp copies 16 keys of the tile over its passes: lane l < 16 looks up the slot of
      // the l-th of them once, the copy loop takes it by shuffle.
      const int lk =
          (lane / (32 / kChunks)) * kKeysPerPass + warp * (32 / kChunks) + lane % (32 / kChunks);
      const int64_t mine = lane < 16 && j0 + lk < j1 ? a.layout.Slot(s, j0 + lk) : 0;
#pragma unroll
      for (int i = threadIdx.x; i < kBN * kChunks; i += kWarps * 32) {
        const int key = i / kChunks, ch = i % kChunks;
        const int pass = (i - threadIdx.x) / (kWarps * 32);
        const int64_t slot = __shfl_sync(0xffffffffu, mine, pass * (32 / kChunks) + lane / kChunks);
        const int64_t j = j0 + key;
        const bool ok = j < j1;
        if constexpr (kFp8) {
          const int o = attn::TileOffset<D>(key, ch);
          fp8.Stage(sk + o, sv + o, slot, ch, ok);
        } else {
          const int64_t off = ok ? slot * stride + ch * 8 : 0;
          attn::CpAsync16(sk + attn::TileOffset<D>(key, ch), kg + off, ok);
          attn::CpAsync16(sv + attn::TileOffset<D>(key, ch), vg + off, ok);
        }
      }
    };
    if (ntiles > 0) load(0, 0);
    attn::CpAsyncCommit();
    for (int64_t t = 0; t < ntiles; ++t) {
      if (t + 1 < ntiles) load(t + 1, (t + 1) & 1);
      attn::CpAsyncCommit();
      attn::CpAsyncWait<1>();
      if constexpr (kFp8) {
        bf16* staged = tiles + (t & 1) * 2 * kBN * D;
        attn::DequantTiles<D>(staged, staged + kBN * D, static_cast<int>(threadIdx.x), kWarps * 32,
                              kBN);
      }
      __syncthreads();
      int64_t j0, j1;
      uint32_t bits;
      tile(t, j0, j1, bits);
      if ((bits & wbits) != 0 && j0 <= wmax) {
        const bf16* sk = tiles + (t & 1) * 2 * kBN * D;
        // Each M row sees a prefix of the tile: keys [j0, min(j1, pos + 1)) when the row is of
        // this sequence and chose the tile's block, none otherwise.
        int lim[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const bool sees = seq[h] == s && ((bits >> rl[h]) & 1u);
          lim[h] = sees ? static_cast<int>(max(int64_t{0}, min(j1, pos[h] + 1) - j0)) : 0;
        }
        attn::AttendTile<D, kBN>(
            w, sk, sk + kBN * D, a.scale_log2, [&](int h, int key) { return key < lim[h]; }, lane);
      }
      __syncthreads();
    }
    attn::CpAsyncWait<0>();
    __syncthreads();
  }

  attn::FinishRowSums<D>(w);
  const int t2 = 2 * (lane & 3);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (seq[h] < 0) continue;
    const int mr = g8 + 8 * h;
    bf16* o = a.out + (row[h] * hq + g * G + mr % G) * D;
    const float inv = w.l[h] > 0.0f ? 1.0f / w.l[h] : 0.0f;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const uint32_t v = attn::PackBf16(w.acc[n][2 * h] * inv, w.acc[n][2 * h + 1] * inv);
      *reinterpret_cast<uint32_t*>(o + n * 8 + t2) = v;
    }
  }
}

template <int D, bool kFp8>
void Launch(const Args& a, cudaStream_t stream) {
  const int64_t R = int64_t{kWarps} * a.rows_per_warp;
  const int64_t E = a.selected ? R * a.topk : 0;
  const size_t smem = TileBytes<D>() + static_cast<size_t>(E) * 16;
  // The largest request (32 rows x top-64 lists), once per device.
  AllowDynamicShared<PrefillKernel<D, kFp8>>(TileBytes<D>() + kMaxRowsPerCta * kMaxTopk * 16);
  const int64_t ctas = (a.layout.rows - a.row_begin + R - 1) / R;
  const dim3 grid(static_cast<unsigned>(ctas), static_cast<unsigned>(a.dims.num_kv_heads));
  PrefillKernel<D, kFp8><<<grid, kWarps * 32, smem, stream>>>(a);
}

}  // namespace

void PagedPrefillAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                           int64_t row_begin, const AttentionDims& dims, const int32_t* selected,
                           int64_t topk, int64_t block_size, bf16* out, cudaStream_t stream) {
  if (layout.rows <= row_begin) return;
  const int64_t G = dims.num_q_heads / dims.num_kv_heads;
  const int rpw = static_cast<int>(std::min<int64_t>(16 / G, kMaxRowsPerCta / kWarps));
  Args a{q,
         kv.k,
         kv.v,
         layout,
         dims,
         selected,
         topk,
         block_size,
         row_begin,
         rpw,
         dims.scale * attn::kLog2e,
         out,
         kv.k_scales,
         kv.v_scales};
  if (dims.head_dim == 128)
    kv.fp8() ? Launch<128, true>(a, stream) : Launch<128, false>(a, stream);
  else
    kv.fp8() ? Launch<64, true>(a, stream) : Launch<64, false>(a, stream);
}

}  // namespace m3::kernels::cuda
