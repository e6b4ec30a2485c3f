// Split-K decode attention: each of a CTA's four warps streams its own 32-key tiles of the
// split's key range through a two-stage cp.async pipeline into its own shared tiles and runs
// them through the tensor-core tile (its 16 M rows are the group's q heads); the warps merge in
// shared memory, then either write the row's output (one split) or the split's partial.
#include "kernels/cuda/paged_decode_attention.cuh"

#include <algorithm>

#include "kernels/cuda/attention_tile.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kBN = 16;  // keys per warp tile
constexpr int kStages = 3;
constexpr int64_t kRound = kWarps * kBN;  // keys a CTA covers per pipeline step
constexpr int kMaxSparseTopk = 64;        // selection slots a CTA stages

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
  ChainedKernelStart();
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = blockIdx.x, g = blockIdx.y, c = blockIdx.z;
  const int64_t hq = a.dims.num_q_heads, hkv = a.dims.num_kv_heads, G = hq / hkv;
  const int64_t s = a.layout.SeqOf(r), pos = a.layout.PositionOf(s, r);
  // Sparse: the split covers [lo, hi) of the row's virtual key list, the selected blocks laid
  // end to end (slot i holds keys [i * block_size, (i + 1) * block_size)); empty and repeated
  // slots and keys past pos are masked. Dense: [lo, hi) are keys.
  __shared__ int32_t blocks[kMaxSparseTopk];
  const bool sparse = a.selected != nullptr;
  const int64_t lo = c * a.chunk;
  int64_t hi = 0;
  if (sparse) {
    // Staged, then repeats cleared from shared memory (one global load per slot).
    __shared__ int32_t raw[kMaxSparseTopk];
    const int t = static_cast<int>(threadIdx.x);
    if (t < a.topk) raw[t] = a.selected[(g * a.layout.rows + r) * a.topk + t];
    __syncthreads();
    if (t < a.topk) {
      int32_t b = raw[t];
      for (int p = 0; p < t && b >= 0; ++p)
        if (raw[p] == b) b = -1;
      blocks[t] = b;
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
    // Lane l looks up key l's slot once (-1: masked); the copy loop takes it by shuffle.
    const int64_t key_l = lane < kBN ? key_of(j0 + lane) : -1;
    const int64_t mine = key_l >= 0 ? attn::SlotOf(a.layout, s, key_l) : -1;
#pragma unroll
    for (int i = lane; i < kBN * kChunks; i += 32) {
      const int key = i / kChunks, ch = i % kChunks;
      const int64_t slot = __shfl_sync(0xffffffffu, mine, key);
      const bool ok = slot >= 0;
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
    const uint32_t live = __ballot_sync(0xffffffffu, lane < kBN && key_of(j0 + lane) >= 0);
    const bf16* sk = tiles + st * 2 * kBN * D;
    attn::AttendTile<D, kBN>(
        w, sk, sk + kBN * D, a.scale_log2, [&](int, int key) { return (live >> key) & 1u; }, lane);
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

template <int D>
void Launch(const Args& a, int64_t num_decodes, cudaStream_t stream) {
  constexpr size_t smem = SmemBytes<D>();
  static_assert(smem >= (kWarps * 16 * D + kWarps * 32) * sizeof(float), "merge space");
  AllowDynamicShared<DecodeKernel<D>>(smem);
  const dim3 grid(static_cast<unsigned>(num_decodes), static_cast<unsigned>(a.dims.num_kv_heads),
                  static_cast<unsigned>(a.splits));
  LaunchAfterPrior(DecodeKernel<D>, grid, kWarps * 32, smem, stream, a);
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
  // Sparse: the split count only (the launch sizes the splits from the block size): about one
  // CTA per SM, at most two per selected block (at batch 1 a 128-key block is two CTAs, at
  // batch 32 one CTA streams all 16 blocks of a row's group). A second CTA per SM costs more in
  // partials and their combine than it hides (H100, 128K, batch 32: 1 split 57 us, 2 splits
  // 61 us, 4 splits 69 us).
  if (topk > 0) return {std::min(std::max<int64_t>(1, SmCount() / ctas), 2 * topk), 0};
  // Dense: one wave of two CTAs per SM (each holds 96 KiB of tiles) over the whole grid, in
  // whole pipeline rounds; more rows than that keep one split.
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
  if (selected != nullptr && (topk > kMaxSparseTopk || block_size <= 0))
    throw std::runtime_error("paged decode attention: top-k of " + std::to_string(topk) +
                             " blocks of " + std::to_string(block_size) +
                             " keys is not supported (at most 64 blocks)");
  DecodePlan p = plan;
  if (selected != nullptr) {
    // The planned split count over topk * block_size virtual keys, in whole rounds; never more
    // splits than planned (the workspace was sized for those).
    const int64_t total = topk * block_size;
    const int64_t rounds = (total + kRound - 1) / kRound;
    const int64_t per =
        (rounds + std::min(plan.splits, rounds) - 1) / std::min(plan.splits, rounds);
    p.chunk = per * kRound;
    p.splits = (total + p.chunk - 1) / p.chunk;
  }
  const int64_t parts = num_decodes * dims.num_q_heads * p.splits;
  Args a{q,
         k_pages,
         v_pages,
         layout,
         dims,
         selected,
         topk,
         block_size,
         p.chunk,
         p.splits,
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
