// M3Ops: the ops the MiniMax-M3 graphs (engine/minimax_m3/) are written against, at fused
// granularity so a GPU implementation launches one kernel per op. Each implementation runs on
// one Device, whose memory its tensors live in and whose step workspace / stream it uses: the
// CPU's (cpu/cpu_m3_ops.h) on kernels/cpu, the CUDA one's (cuda/cuda_m3_ops.h) on kernels/cuda.
// MakeM3Ops (make_m3_ops.h) picks the one for a device. Another model family declares its own
// op set beside this one; ops both families share would move to a common base then.
//
// Shapes are row-major; activations are in the device's activation_dtype(), norms, softmax and
// routing are computed in float32 everywhere. Per-step metadata (StepMetadata) is built once per
// forward step by Device::PrepareStep and shared by every layer.
#pragma once

#include <cstdint>
#include <span>

#include "engine/backend/device_tensor.h"
#include "engine/backend/linear_weight.h"
#include "engine/backend/step_metadata.h"

namespace m3::engine::backend {

// One decoder layer's paged KV storage: every tensor is indexed by page id, and one block table
// per sequence addresses all of them.
struct LayerKvCache {
  // [pages, page_size, kv_heads, head_dim]: the activation dtype, or with the FP8 KV cache
  // (RunnerOptions::fp8_kv_cache) F8E4M3 codes of x / scale with the scales in k_scales /
  // v_scales.
  DeviceTensor k;
  DeviceTensor v;
  DeviceTensor index_k;  // [pages, page_size, index_head_dim] for MSA layers; empty otherwise
  // The FP8 index-key cache instead of index_k (RunnerOptions::fp8_index_keys): e4m3 codes of
  // k / scale, u8 [pages, page_size, index_head_dim], and one float32 scale per key,
  // [pages, page_size] (kernels/cpu/msa_index_fp8.h). Written at KV-write time, read by
  // MsaSelectBlocks.
  DeviceTensor index_codes;
  DeviceTensor index_scales;
  bool fp8_index() const { return static_cast<bool>(index_codes); }
  // The FP8 KV cache's scales: one float32 per (slot, kv head) vector, [pages, page_size,
  // kv_heads], scale = max|x| / 448 (1 for an all-zero vector), written with the codes at
  // KV-write time and read by the attention ops, which dequantize code * scale as they load.
  DeviceTensor k_scales;
  DeviceTensor v_scales;
  bool fp8_kv() const { return static_cast<bool>(k_scales); }
};

// Shapes of the fused QKV projection output: q heads, then k heads, v heads, then (MSA layers)
// the index query heads and the one index key head, each head_dim / index_head_dim wide.
struct QkvLayout {
  int64_t q_heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // leading channels of each head that RoPE rotates
  int64_t index_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_rotary_dim = 0;  // prefix of the same cos/sin rows
  float eps = 1e-6f;             // Gemma RMSNorm epsilon of the per-head norms
  int64_t width() const {
    return (q_heads + 2 * kv_heads) * head_dim +
           (index_heads > 0 ? (index_heads + 1) * index_head_dim : 0);
  }
};

struct QkNormWeights {
  DeviceTensor q_norm, k_norm;              // [head_dim]
  DeviceTensor index_q_norm, index_k_norm;  // [index_head_dim] (MSA layers)
};

struct AttentionShape {
  int64_t q_heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  float scale = 1.0f;
};

struct MsaParams {
  int64_t index_heads = 0;  // one selection per KV group: index_heads == kv_heads
  int64_t index_head_dim = 0;
  int64_t block_size = 0;
  int64_t topk_blocks = 0;
  int64_t local_blocks = 0;
};

struct SwigluParams {
  float alpha = 1.702f;
  float limit = 7.0f;
};

// The routed experts one rank holds, [first, first + count) of the router's; count < 0: all.
struct ExpertRange {
  int64_t first = 0;
  int64_t count = -1;
};

class M3Ops {
 public:
  virtual ~M3Ops() = default;

  // ---- elementwise / normalization / data movement ----
  // out[r] = table[ids[r]]; ids i32 [rows], table [vocab, hidden].
  virtual void Embedding(const DeviceTensor& table, const DeviceTensor& ids,
                         const DeviceTensor& out) = 0;
  // dst rows [dst_row, +count) = src rows [src_row, +count).
  virtual void CopyRows(const DeviceTensor& src, int64_t src_row, const DeviceTensor& dst,
                        int64_t dst_row, int64_t count) = 0;
  // out[i] = src[index[i]]; index i32 [n].
  virtual void GatherRows(const DeviceTensor& src, const DeviceTensor& index,
                          const DeviceTensor& out) = 0;
  // residual += delta (when given); out = RMSNormGemma(residual) * (1 + weight). Rows of both.
  virtual void AddRmsNorm(const DeviceTensor& residual, const DeviceTensor* delta,
                          const DeviceTensor& weight, float eps, const DeviceTensor& out) = 0;
  virtual void LayerNorm(const DeviceTensor& x, const DeviceTensor& weight,
                         const DeviceTensor& bias, float eps, const DeviceTensor& out) = 0;
  virtual void Add(const DeviceTensor& x, const DeviceTensor& delta) = 0;  // x += delta
  virtual void Gelu(const DeviceTensor& x) = 0;                            // erf form, in place

  // ---- GEMM ----
  // y[m, n] = x[m, k] . w[n, k]^T (+ bias[n]); w in the nn.Linear layout: dense in the
  // device's weight_dtype(), or block-scaled (linear_weight.h) where the device keeps it so.
  virtual void Linear(const DeviceTensor& x, const LinearWeight& w, const DeviceTensor* bias,
                      const DeviceTensor& y) = 0;

  // ---- decoder attention ----
  // From the fused projection qkv [rows, layout.width()]: per-head Gemma RMSNorm and partial
  // RoPE (meta.rope_*) of q and k (and the index q / k), q into q_out [rows, q_heads, head_dim],
  // index q into index_q_out [rows, index_heads, index_head_dim]; k, v and the index key written
  // into the cache pages at meta.slot_mapping.
  virtual void QkNormRopeToCache(const DeviceTensor& qkv, const QkvLayout& layout,
                                 const QkNormWeights& norms, const StepMetadata& meta,
                                 const DeviceTensor& q_out, const DeviceTensor* index_q_out,
                                 const LayerKvCache& cache) = 0;
  // Causal attention of every row over its sequence's pages (prefill chunks and decodes).
  virtual void PagedAttention(const DeviceTensor& q, const LayerKvCache& cache,
                              const StepMetadata& meta, const AttentionShape& shape,
                              const DeviceTensor& out) = 0;
  // MSA lightning indexer: per (index head = KV group, row) block scores over the row's visible
  // index keys (max over each block), the local_blocks blocks ending at the row's own forced in,
  // top-k. selected i32 [index_heads, rows, topk_blocks]: by descending score (ties: lower
  // block first), -1 padded.
  virtual void MsaSelectBlocks(const DeviceTensor& index_q, const LayerKvCache& cache,
                               const StepMetadata& meta, const MsaParams& params,
                               const DeviceTensor& selected) = 0;
  // Causal attention restricted to the selected key blocks of each row's KV group.
  virtual void BlockSparseAttention(const DeviceTensor& q, const LayerKvCache& cache,
                                    const StepMetadata& meta, const AttentionShape& shape,
                                    const DeviceTensor& selected, int64_t topk, int64_t block_size,
                                    const DeviceTensor& out) = 0;
  // An MSA layer's attention: MsaSelectBlocks, then BlockSparseAttention over its selection
  // (left in `selected`). An implementation may fuse them (the CUDA one selects inside the
  // attention kernel for small decode steps).
  virtual void MsaAttention(const DeviceTensor& q, const DeviceTensor& index_q,
                            const LayerKvCache& cache, const StepMetadata& meta,
                            const MsaParams& params, const AttentionShape& shape,
                            const DeviceTensor& selected, const DeviceTensor& out) {
    MsaSelectBlocks(index_q, cache, meta, params, selected);
    BlockSparseAttention(q, cache, meta, shape, selected, params.topk_blocks, params.block_size,
                         out);
  }

  // ---- MLP / MoE ----
  // gate_up [rows, 2I] (gate half, then up half) -> out [rows, I].
  virtual void SwigluOai(const DeviceTensor& gate_up, const SwigluParams& p,
                         const DeviceTensor& out) = 0;
  // Sigmoid routing: top-k experts by sigmoid(logit) + bias, weights normalized to sum 1.
  // ids i32 [rows, k], weights f32 [rows, k]. Ids are `local`'s: a chosen expert in the range
  // as its index there, any other as -1 (expert parallelism: another rank computes it).
  virtual void MoeRoute(const DeviceTensor& router_logits, const DeviceTensor& bias,
                        const DeviceTensor& ids, const DeviceTensor& weights,
                        const ExpertRange& local) = 0;
  // Token permutation by expert, grouped expert MLPs (gate_up [E, 2I, H], down [E, H, I]) and
  // weighted un-permutation: out[r] = scale * sum_j weights[r, j] * expert_{ids[r, j]}(x[r])
  // + out[r] (out holds e.g. the shared expert's output); picks with id -1 add nothing.
  virtual void MoeExperts(const DeviceTensor& x, const DeviceTensor& ids,
                          const DeviceTensor& weights, const LinearWeight& gate_up,
                          const LinearWeight& down, const SwigluParams& p, float scale,
                          const DeviceTensor& out) = 0;

  // ---- vision ----
  // qkv [rows, 3 * heads * head_dim] (q, k, v): rotary (cos/sin [rows, rot], rotate-half over
  // the first rot channels of each head) on q and k, then non-causal attention within each
  // segment [segments[i], segments[i + 1]) -> out [rows, heads * head_dim].
  virtual void SegmentAttention(const DeviceTensor& qkv, const DeviceTensor& cos,
                                const DeviceTensor& sin, int64_t rot,
                                std::span<const int64_t> segments, int64_t heads, int64_t head_dim,
                                const DeviceTensor& out) = 0;
};

}  // namespace m3::engine::backend
