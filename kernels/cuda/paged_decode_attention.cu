// Split-K decode attention: each of a CTA's four warps streams its own 32-key tiles of the
// split's key range through a two-stage cp.async pipeline into its own shared tiles and runs
// them through the tensor-core tile (its 16 M rows are the group's q heads); the warps merge in
// shared memory, then either write the row's output (one split) or the split's partial.
#include "kernels/cuda/paged_decode_attention.cuh"

#include <algorithm>
#include <atomic>

#include "kernels/cuda/attention_tile.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kBN = 16;  // keys per warp tile
constexpr int kStages = 3;
constexpr int64_t kRound = kWarps * kBN;  // keys a CTA covers per pipeline step

template <int D>
constexpr size_t SmemBytes() {
  return size_t{kWarps} * kStages * 2 * kBN * D * sizeof(bf16);
}

struct Args {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  PagedLayout layout;
  AttentionDims dims;
  const int32_t* selected;  // null: dense
  int64_t topk;
  int64_t block_size;
  int64_t chunk;
  int64_t splits;
  float scale_log2;
  float* part;  // [num_decodes, q_heads, splits, D] unnormalized outputs
  float* ml;    // [num_decodes, q_heads, splits, 2] (max in log2 units, sum)
  bf16* out;
};

template <int D>
__global__ void __launch_bounds__(kWarps * 32, 2) DecodeKernel(Args a) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = blockIdx.x, g = blockIdx.y, c = blockIdx.z;
  const int64_t hq = a.dims.num_q_heads, hkv = a.dims.num_kv_heads, G = hq / hkv;
  const int64_t s = a.layout.SeqOf(r), pos = a.layout.PositionOf(s, r);
  int64_t lo = 0, hi = 0;
  if (a.selected == nullptr) {
    lo = c * a.chunk;
    hi = min(lo + a.chunk, pos + 1);
  } else {
    const int32_t* sel = a.selected + (g * a.layout.rows + r) * a.topk;
    const int32_t b = sel[c];
    bool skip = b < 0;
    for (int64_t p = 0; p < c && !skip; ++p) skip = sel[p] == b;
    if (!skip) {
      lo = int64_t{b} * a.block_size;
      hi = min(lo + a.block_size, pos + 1);
    }
  }

  const int g8 = lane >> 2;
  const bf16* qg = a.q + (r * hq + g * G) * D;
  attn::WarpState<D> w;
  attn::InitState<D>(w, g8 < G ? qg + g8 * D : nullptr, g8 + 8 < G ? qg + (g8 + 8) * D : nullptr,
                     lane);

  bf16* tiles = reinterpret_cast<bf16*>(smem_raw) + warp * kStages * 2 * kBN * D;
  const int64_t stride = hkv * D;
  const bf16* kg = a.k + g * D;
  const bf16* vg = a.v + g * D;
  auto load = [&](int64_t j0, int st) {
    bf16* sk = tiles + st * 2 * kBN * D;
    bf16* sv = sk + kBN * D;
    constexpr int kChunks = D / 8;
    // Lane l looks up key l's slot once; the copy loop takes it by shuffle.
    const int64_t mine = j0 + lane < hi && lane < kBN ? attn::SlotOf(a.layout, s, j0 + lane) : 0;
#pragma unroll
    for (int i = lane; i < kBN * kChunks; i += 32) {
      const int key = i / kChunks, ch = i % kChunks;
      const int64_t slot = __shfl_sync(0xffffffffu, mine, key);
      const bool ok = j0 + key < hi;
      const int64_t off = ok ? slot * stride + ch * 8 : 0;
      attn::CpAsync16(sk + attn::TileOffset<D>(key, ch), kg + off, ok);
      attn::CpAsync16(sv + attn::TileOffset<D>(key, ch), vg + off, ok);
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
    __syncwarp();
    const int n = static_cast<int>(min(hi - j0, int64_t{kBN}));
    const bf16* sk = tiles + st * 2 * kBN * D;
    attn::AttendTile<D, kBN>(
        w, sk, sk + kBN * D, a.scale_log2, [&](int, int key) { return key < n; }, lane);
    __syncwarp();
  }
  attn::CpAsyncWait<0>();
  attn::FinishRowSums<D>(w);
  __syncthreads();  // every warp is done with its tiles: reuse them for the merge

  float* red = reinterpret_cast<float*>(smem_raw);
  float* wacc = red + warp * 16 * D;
  float* wm = red + kWarps * 16 * D + warp * 32;
  float* wl = wm + 16;
  const int t2 = 2 * (lane & 3);
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int col = n * 8 + t2;
    wacc[g8 * D + col] = w.acc[n][0];
    wacc[g8 * D + col + 1] = w.acc[n][1];
    wacc[(g8 + 8) * D + col] = w.acc[n][2];
    wacc[(g8 + 8) * D + col + 1] = w.acc[n][3];
  }
  if ((lane & 3) == 0) {
    wm[g8] = w.m[0];
    wm[g8 + 8] = w.m[1];
    wl[g8] = w.l[0];
    wl[g8 + 8] = w.l[1];
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < G * D; i += blockDim.x) {
    const int64_t h = i / D, d = i % D;
    float M = -INFINITY;
    for (int p = 0; p < kWarps; ++p) M = fmaxf(M, red[kWarps * 16 * D + p * 32 + h]);
    float L = 0.0f, O = 0.0f;
    if (M != -INFINITY) {
      for (int p = 0; p < kWarps; ++p) {
        const float* pm = red + kWarps * 16 * D + p * 32;
        const float f = exp2f(pm[h] - M);
        L += f * pm[16 + h];
        O += f * red[p * 16 * D + h * D + d];
      }
    }
    const int64_t head = r * hq + g * G + h;
    if (a.splits == 1) {
      a.out[head * D + d] = __float2bfloat16(L > 0.0f ? O / L : 0.0f);
    } else {
      a.part[(head * a.splits + c) * D + d] = O;
      if (d == 0) {
        a.ml[(head * a.splits + c) * 2] = M;
        a.ml[(head * a.splits + c) * 2 + 1] = L;
      }
    }
  }
}

// Merges the splits of one (row, q head): out = sum_c 2^(m_c - M) o_c / sum_c 2^(m_c - M) l_c.
__global__ void CombineKernel(const float* part, const float* ml, int64_t splits, int64_t dim,
                              bf16* out) {
  const int64_t head = blockIdx.x;
  const float* m = ml + head * splits * 2;
  float M = -INFINITY;
  for (int64_t c = 0; c < splits; ++c) M = fmaxf(M, m[2 * c]);
  float L = 0.0f;
  if (M != -INFINITY)
    for (int64_t c = 0; c < splits; ++c) L += exp2f(m[2 * c] - M) * m[2 * c + 1];
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    float O = 0.0f;
    if (M != -INFINITY)
      for (int64_t c = 0; c < splits; ++c)
        O += exp2f(m[2 * c] - M) * part[(head * splits + c) * dim + d];
    out[head * dim + d] = __float2bfloat16(O * inv);
  }
}

// Per device, looked up once: the plan is made on every call.
int SmCount() {
  static std::atomic<int> cached[64];
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 132;
  if (dev < 64 && (n = cached[dev].load(std::memory_order_relaxed)) > 0) return n;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
    return 132;
  if (dev < 64) cached[dev].store(n, std::memory_order_relaxed);
  return n;
}

template <int D>
void Launch(const Args& a, int64_t num_decodes, cudaStream_t stream) {
  constexpr size_t smem = SmemBytes<D>();
  static_assert(smem >= (kWarps * 16 * D + kWarps * 32) * sizeof(float), "merge space");
  AllowDynamicShared<DecodeKernel<D>>(smem);
  const dim3 grid(static_cast<unsigned>(num_decodes), static_cast<unsigned>(a.dims.num_kv_heads),
                  static_cast<unsigned>(a.splits));
  DecodeKernel<D><<<grid, kWarps * 32, smem, stream>>>(a);
  if (a.splits > 1) {
    CombineKernel<<<static_cast<unsigned>(num_decodes * a.dims.num_q_heads), 128, 0, stream>>>(
        a.part, a.ml, a.splits, D, a.out);
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
  if (topk > 0) return {topk, 0};
  // One wave of two CTAs per SM (each holds 96 KiB of tiles) over the whole grid, in whole
  // pipeline rounds; more rows than that keep one split.
  const int64_t ctas = std::max<int64_t>(1, num_decodes * dims.num_kv_heads);
  const int64_t want = std::max<int64_t>(1, 2 * SmCount() / ctas);
  const int64_t rounds = std::max<int64_t>(1, (max_keys + kRound - 1) / kRound);
  const int64_t per = (rounds + std::min(want, rounds) - 1) / std::min(want, rounds);
  const int64_t chunk = per * kRound;
  return {(std::max<int64_t>(max_keys, 1) + chunk - 1) / chunk, chunk};
}

size_t DecodeWorkspaceBytes(const DecodePlan& plan, int64_t num_decodes,
                            const AttentionDims& dims) {
  if (plan.splits <= 1) return 0;
  return static_cast<size_t>(num_decodes * dims.num_q_heads * plan.splits * (dims.head_dim + 2)) *
         sizeof(float);
}

void PagedDecodeAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                          const PagedLayout& layout, int64_t num_decodes, const AttentionDims& dims,
                          const int32_t* selected, int64_t topk, int64_t block_size,
                          const DecodePlan& plan, float* workspace, bf16* out,
                          cudaStream_t stream) {
  if (num_decodes <= 0) return;
  const int64_t parts = num_decodes * dims.num_q_heads * plan.splits;
  Args a{q,
         k_pages,
         v_pages,
         layout,
         dims,
         selected,
         topk,
         block_size,
         plan.chunk,
         plan.splits,
         dims.scale * attn::kLog2e,
         workspace,
         workspace ? workspace + parts * dims.head_dim : nullptr,
         out};
  if (dims.head_dim == 128)
    Launch<128>(a, num_decodes, stream);
  else
    Launch<64>(a, num_decodes, stream);
}

}  // namespace m3::kernels::cuda
