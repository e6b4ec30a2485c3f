// Paged attention entry points: decode rows to the split-K kernel, the other rows to the
// tensor-core prefill kernel (or the key-block-major one for many block-sparse rows), and the
// reference kernel (one warp per (row, q head) streaming its keys with an online softmax, each
// lane holding head_dim / 32 channels (lane + 32 i) of q and the accumulator) for shapes the
// fast paths do not take.
#include "kernels/cuda/paged_attention.cuh"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/block_major_sparse_attention.cuh"
#include "kernels/cuda/paged_decode_attention.cuh"
#include "kernels/cuda/paged_prefill_attention.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

struct WarpHead {
  float q[kMaxPerLane];
  float acc[kMaxPerLane];
  float m = -INFINITY;
  float l = 0.0f;
};

// Channel c of a K or V row: a bf16 value, or an FP8 code times the row's scale.
template <bool kFp8>
__device__ __forceinline__ float KvAt(const void* row, int64_t c, float scale) {
  if constexpr (kFp8)
    return attn::E4M3ToFloat(static_cast<const uint8_t*>(row)[c]) * scale;
  else
    return __bfloat162float(static_cast<const bf16*>(row)[c]);
}

// One key: score, online-softmax rescale and value accumulation (ks / vs: the FP8 rows' scales).
template <bool kFp8>
__device__ __forceinline__ void AttendKey(WarpHead& h, const void* k, const void* v, float ks,
                                          float vs, int64_t dim, float scale, int lane) {
  float dot = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < dim) dot += h.q[i] * KvAt<kFp8>(k, c, ks);
  }
  const float s = WarpSum(dot) * scale;
  const float m_new = fmaxf(h.m, s);
  const float corr = expf(h.m - m_new);
  const float p = expf(s - m_new);
  h.l = h.l * corr + p;
  h.m = m_new;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < dim) h.acc[i] = h.acc[i] * corr + p * KvAt<kFp8>(v, c, vs);
  }
}

struct Args {
  const bf16* q;
  const void* k;  // bf16 values, or FP8 codes (k_scales set)
  const void* v;
  PagedLayout layout;
  AttentionDims dims;
  const int32_t* selected;  // null: dense causal
  int64_t topk;
  int64_t block_size;
  bf16* out;
  const float* k_scales;  // FP8 pages' scales (KvPages)
  const float* v_scales;
  KvPages kv() const { return {k, v, k_scales, v_scales}; }
};

template <bool kFp8>
__global__ void PagedAttentionKernel(Args a) {
  const int lane = threadIdx.x & 31;
  const int64_t hq = a.dims.num_q_heads, hkv = a.dims.num_kv_heads, D = a.dims.head_dim;
  const int64_t idx = int64_t{blockIdx.x} * kWarps + (threadIdx.x >> 5);
  const int64_t rows = a.layout.rows;
  if (idx >= rows * hq) return;
  const int64_t r = idx / hq, h = idx % hq, g = h / (hq / hkv);
  const int64_t s = a.layout.SeqOf(r), pos = a.layout.PositionOf(s, r);
  const int64_t stride = hkv * D;
  WarpHead w;
  const bf16* qr = a.q + (r * hq + h) * D;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    w.q[i] = c < D ? __bfloat162float(qr[c]) : 0.0f;
    w.acc[i] = 0.0f;
  }
  auto attend_range = [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      const int64_t slot = a.layout.Slot(s, j), off = slot * stride + g * D;
      if constexpr (kFp8) {
        const auto* k = static_cast<const uint8_t*>(a.k);
        const auto* v = static_cast<const uint8_t*>(a.v);
        AttendKey<true>(w, k + off, v + off, a.k_scales[slot * hkv + g], a.v_scales[slot * hkv + g],
                        D, a.dims.scale, lane);
      } else {
        const auto* k = static_cast<const bf16*>(a.k);
        const auto* v = static_cast<const bf16*>(a.v);
        AttendKey<false>(w, k + off, v + off, 1.0f, 1.0f, D, a.dims.scale, lane);
      }
    }
  };
  if (a.selected == nullptr) {
    attend_range(0, pos + 1);
  } else {
    const int32_t* sel = a.selected + (g * rows + r) * a.topk;
    for (int64_t i = 0; i < a.topk; ++i) {
      const int32_t b = sel[i];
      if (b < 0) continue;
      bool seen = false;
      for (int64_t p = 0; p < i; ++p) seen |= sel[p] == b;
      if (seen) continue;
      const int64_t kb = int64_t{b} * a.block_size;
      const int64_t ke = pos + 1 < kb + a.block_size ? pos + 1 : kb + a.block_size;
      attend_range(kb, ke);
    }
  }
  bf16* o = a.out + (r * hq + h) * D;
  const float inv = w.l > 0.0f ? 1.0f / w.l : 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < D) o[c] = __float2bfloat16(w.acc[i] * inv);
  }
}

void Launch(const Args& a, cudaStream_t stream) {
  if (a.layout.rows <= 0) return;
  if (a.dims.head_dim > 32 * kMaxPerLane)
    throw std::runtime_error("paged attention: head_dim above 256 is not supported");
  const int64_t warps = a.layout.rows * a.dims.num_q_heads;
  if (a.kv().fp8())
    PagedAttentionKernel<true><<<Blocks(warps, kWarps), kWarps * 32, 0, stream>>>(a);
  else
    PagedAttentionKernel<false><<<Blocks(warps, kWarps), kWarps * 32, 0, stream>>>(a);
}

constexpr int64_t kMaxFastTopk = 64;  // the prefill kernel's per-CTA selection lists

bool UseFastPaths(const Args& a) {
  return TensorCoreAttentionSupported(a.dims) && a.topk <= kMaxFastTopk;
}

// Decode rows the split-K kernel takes (0 when the fast paths do not apply).
int64_t FastDecodes(const Args& a) {
  return UseFastPaths(a) ? std::clamp<int64_t>(a.layout.num_decodes, 0, a.layout.rows) : 0;
}

// Sparse prefill rows: key-block-major once a step has enough of them for blocks to be shared
// (or their partials to be worth it), query-major below. M3_SPARSE_PREFILL=query|block forces
// one (the tests run both, the benchmarks compare them).
bool UseBlockMajor(const Args& a, int64_t decodes) {
  constexpr int64_t kMinRows = 256;
  if (a.selected == nullptr || !BlockMajorSparseAttentionSupported(a.dims, a.block_size))
    return false;
  if (const char* env = std::getenv("M3_SPARSE_PREFILL")) {
    if (std::strcmp(env, "query") == 0) return false;
    if (std::strcmp(env, "block") == 0) return true;
  }
  return a.layout.rows - decodes >= kMinRows;
}

DecodePlan Plan(const PagedLayout& layout, const AttentionDims& dims, int64_t topk) {
  return PlanDecode(layout.num_decodes, layout.max_pages * layout.page_size, dims, topk);
}

void Dispatch(const Args& a, AttentionWorkspace ws, cudaStream_t stream) {
  if (a.layout.rows <= 0) return;
  if (!UseFastPaths(a)) {
    Launch(a, stream);
    return;
  }
  const int64_t decodes = FastDecodes(a);
  if (decodes > 0) {
    const DecodePlan plan = Plan(a.layout, a.dims, a.selected ? a.topk : 0);
    const size_t need = DecodeWorkspaceBytes(plan, decodes, a.dims);
    void* scratch = ws.data;
    if (need > 0 && (scratch == nullptr || ws.bytes < need)) {
      if (ws.data != nullptr)
        throw std::runtime_error("paged attention: workspace of " + std::to_string(ws.bytes) +
                                 " bytes, " + std::to_string(need) + " needed");
      if (cudaMallocAsync(&scratch, need, stream) != cudaSuccess)
        throw std::runtime_error("paged attention: no memory for " + std::to_string(need) +
                                 " bytes of split-K partials");
    }
    PagedDecodeAttention(a.q, a.kv(), a.layout, decodes, a.dims, a.selected, a.topk, a.block_size,
                         plan, static_cast<float*>(scratch), a.out, stream);
    if (need > 0 && ws.data == nullptr) cudaFreeAsync(scratch, stream);
  }
  if (UseBlockMajor(a, decodes) &&
      BlockMajorSparseAttention(a.q, a.kv(), a.layout, decodes, a.dims, a.selected, a.topk,
                                a.block_size, a.out, stream))
    return;
  PagedPrefillAttention(a.q, a.kv(), a.layout, decodes, a.dims, a.selected, a.topk, a.block_size,
                        a.out, stream);
}

}  // namespace

size_t PagedAttentionWorkspaceBytes(const PagedLayout& layout, const AttentionDims& dims,
                                    int64_t topk) {
  const Args a{nullptr, nullptr, nullptr, layout,  dims,   nullptr,
               topk,    0,       nullptr, nullptr, nullptr};
  const int64_t decodes = FastDecodes(a);
  if (decodes <= 0) return 0;
  return DecodeWorkspaceBytes(Plan(layout, dims, topk), decodes, dims);
}

void PagedAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                    const AttentionDims& dims, bf16* out, cudaStream_t stream,
                    AttentionWorkspace workspace) {
  Dispatch({q, kv.k, kv.v, layout, dims, nullptr, 0, 0, out, kv.k_scales, kv.v_scales}, workspace,
           stream);
  CheckLaunch("PagedAttention");
}

void PagedBlockSparseAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                               const AttentionDims& dims, const int32_t* selected, int64_t topk,
                               int64_t block_size, bf16* out, cudaStream_t stream,
                               AttentionWorkspace workspace) {
  Dispatch({q, kv.k, kv.v, layout, dims, selected, topk, block_size, out, kv.k_scales, kv.v_scales},
           workspace, stream);
  CheckLaunch("PagedBlockSparseAttention");
}

bool PagedMsaDecodeAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                             const AttentionDims& dims, const float* scores, int64_t max_blocks,
                             int64_t local_blocks, int64_t topk, int64_t block_size,
                             int32_t* selected, bf16* out, cudaStream_t stream) {
  const Args a{q,    kv.k,       kv.v, layout,      dims,       selected,
               topk, block_size, out,  kv.k_scales, kv.v_scales};
  if (layout.rows <= 0 || topk <= 0 || block_size <= 0 || !UseFastPaths(a) ||
      FastDecodes(a) != layout.rows)
    return false;
  const DecodePlan plan = Plan(layout, dims, topk);
  if (!DecodeSelectsBlocks(plan, max_blocks, dims.head_dim)) return false;
  const DecodeBlockScores select{scores, max_blocks, local_blocks, selected};
  PagedDecodeAttention(q, kv, layout, layout.rows, dims, nullptr, topk, block_size, plan, nullptr,
                       out, stream, &select);
  CheckLaunch("PagedMsaDecodeAttention");
  return true;
}

void PagedAttentionReference(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                             const AttentionDims& dims, const int32_t* selected, int64_t topk,
                             int64_t block_size, bf16* out, cudaStream_t stream) {
  Launch({q, kv.k, kv.v, layout, dims, selected, topk, block_size, out, kv.k_scales, kv.v_scales},
         stream);
  CheckLaunch("PagedAttentionReference");
}

// The bf16-page entry points.
void PagedAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                    const PagedLayout& layout, const AttentionDims& dims, bf16* out,
                    cudaStream_t stream, AttentionWorkspace workspace) {
  PagedAttention(q, Bf16Kv(k_pages, v_pages), layout, dims, out, stream, workspace);
}

void PagedBlockSparseAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                               const PagedLayout& layout, const AttentionDims& dims,
                               const int32_t* selected, int64_t topk, int64_t block_size, bf16* out,
                               cudaStream_t stream, AttentionWorkspace workspace) {
  PagedBlockSparseAttention(q, Bf16Kv(k_pages, v_pages), layout, dims, selected, topk, block_size,
                            out, stream, workspace);
}

bool PagedMsaDecodeAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                             const PagedLayout& layout, const AttentionDims& dims,
                             const float* scores, int64_t max_blocks, int64_t local_blocks,
                             int64_t topk, int64_t block_size, int32_t* selected, bf16* out,
                             cudaStream_t stream) {
  return PagedMsaDecodeAttention(q, Bf16Kv(k_pages, v_pages), layout, dims, scores, max_blocks,
                                 local_blocks, topk, block_size, selected, out, stream);
}

void PagedAttentionReference(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                             const PagedLayout& layout, const AttentionDims& dims,
                             const int32_t* selected, int64_t topk, int64_t block_size, bf16* out,
                             cudaStream_t stream) {
  PagedAttentionReference(q, Bf16Kv(k_pages, v_pages), layout, dims, selected, topk, block_size,
                          out, stream);
}

}  // namespace m3::kernels::cuda
