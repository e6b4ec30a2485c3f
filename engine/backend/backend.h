// Backend: the compute interface the model graphs (engine/minimax_m3/) are written against.
// Memory (allocation, host <-> device copies, weight upload with dtype conversion) and the ops
// the models need at fused granularity, so a GPU backend launches one kernel per op. The CPU
// backend (cpu/cpu_backend.h) implements them on kernels/cpu; a CUDA backend on kernels/cuda.
//
// Shapes are row-major; activations are in activation_dtype() (float32 on the CPU), norms,
// softmax and routing are computed in float32 everywhere. Per-step metadata (StepMetadata) is
// built once per forward step by PrepareStep and shared by every layer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/device_tensor.h"
#include "engine/runtime/batch_sampler.h"
#include "engine/runtime/forward_batch.h"
#include "shared/tensor.h"

namespace m3::engine::backend {

// One decoder layer's paged KV storage: every tensor is indexed by page id, and one block table
// per sequence addresses all of them.
struct LayerKvCache {
  DeviceTensor k;        // [pages, page_size, kv_heads, head_dim]
  DeviceTensor v;        // [pages, page_size, kv_heads, head_dim]
  DeviceTensor index_k;  // [pages, page_size, index_head_dim] for MSA layers; empty otherwise
  // The FP8 index-key cache instead of index_k (RunnerOptions::fp8_index_keys): e4m3 codes of
  // k / scale, u8 [pages, page_size, index_head_dim], and one float32 scale per key,
  // [pages, page_size] (kernels/cpu/msa_index_fp8.h). Written at KV-write time, read by
  // MsaSelectBlocks.
  DeviceTensor index_codes;
  DeviceTensor index_scales;
  bool fp8_index() const { return static_cast<bool>(index_codes); }
};

// The batch layout of one step, on the device, plus host copies for launch decisions.
struct StepMetadata {
  int64_t rows = 0;
  int64_t seqs = 0;
  int64_t num_decodes = 0;
  int64_t page_size = 0;
  int64_t max_pages_per_seq = 0;
  int64_t max_query_len = 0;  // longest row run of one sequence this step
  int64_t max_seq_len = 0;    // longest context_len + rows
  DeviceTensor positions;     // i32 [rows]
  DeviceTensor query_start;   // i32 [seqs + 1]
  DeviceTensor context_lens;  // i32 [seqs]
  DeviceTensor block_tables;  // i32 [seqs, max_pages_per_seq]
  DeviceTensor slot_mapping;  // i64 [rows]
  DeviceTensor rope_cos;      // f32 [rows, rotary_dim] of the text rotary, [freqs, freqs]
  DeviceTensor rope_sin;
  const ForwardBatch* batch = nullptr;  // the host batch it was built from (valid for the step)
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

// A recorded sequence of ops that replays as one launch (a CUDA graph): it reads and writes the
// same buffers every time, so the caller rewrites its input buffers before each Replay.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  virtual void Replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;        // "cpu"
  virtual DType activation_dtype() const = 0;  // float32 on the CPU
  virtual DType weight_dtype() const = 0;      // what UploadWeight stores
  virtual size_t weight_bytes() const = 0;     // uploaded so far
  virtual size_t allocated_bytes() const = 0;  // live buffers, weights included

  // ---- memory ----
  virtual DeviceTensor Alloc(DType dtype, Shape shape) = 0;            // contents undefined
  virtual void Upload(const void* host, const DeviceTensor& dst) = 0;  // dst.bytes() bytes
  virtual void Download(const DeviceTensor& src, void* host) = 0;
  // Weight upload with conversion from the checkpoint dtype (any float dtype): the parts,
  // concatenated along dimension 0, form `shape` (gate/up fusion, expert stacking). Reads the
  // (mmapped) views once; no intermediate copy.
  virtual DeviceTensor UploadWeight(std::span<const TensorView> parts, Shape shape) = 0;

  // ---- step workspace and recorded steps (the defaults: none; GPU backends implement them) ----
  // Reserves `bytes` of scratch once; between BeginStep and EndStep, Alloc hands out pieces of
  // it (from offset `from` on, reset at each BeginStep) instead of allocating, so tensors made
  // in a step must not outlive it. StepWorkspaceUsed: the offset the step has reached (a
  // recorded graph's outputs lie below it, so work after its replay starts there).
  virtual void ReserveStepWorkspace(size_t /*bytes*/) {}
  virtual void BeginStep(size_t /*from*/ = 0) {}
  virtual void EndStep() {}
  virtual size_t StepWorkspaceUsed() const { return 0; }
  // Records `ops` (issued between BeginStep and EndStep, nothing run) into a graph; null when
  // this backend cannot record or the ops cannot be recorded (a host synchronization inside).
  virtual std::unique_ptr<StepGraph> Record(const std::function<void()>& /*ops*/) {
    return nullptr;
  }

  // Built once per step: uploads the batch layout and the text rotary rows
  // (cos/sin host arrays [rows, rotary_dim]).
  virtual StepMetadata PrepareStep(const ForwardBatch& batch, int64_t page_size,
                                   std::span<const float> rope_cos, std::span<const float> rope_sin,
                                   int64_t rotary_dim) = 0;
  // The same, with the rotary rows made from the batch's positions and the rotary inverse
  // frequencies (rotary_dim = 2 * inv_freq.size()) as kernels/cpu/rope.h's RopeCosSin does:
  // here on the host's threads, on the device where a backend can (an 8K-token prefill's tables
  // are 4 MB to compute and upload).
  virtual StepMetadata PrepareStepFromPositions(const ForwardBatch& batch, int64_t page_size,
                                                std::span<const float> inv_freq);

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
  // y[m, n] = x[m, k] . w[n, k]^T (+ bias[n]); w in weight_dtype(), the nn.Linear layout.
  virtual void Linear(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor* bias,
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
  // (left in `selected`). A backend may fuse them (the CUDA one selects inside the attention
  // kernel for small decode steps).
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
                          const DeviceTensor& weights, const DeviceTensor& gate_up,
                          const DeviceTensor& down, const SwigluParams& p, float scale,
                          const DeviceTensor& out) = 0;

  // ---- vision ----
  // qkv [rows, 3 * heads * head_dim] (q, k, v): rotary (cos/sin [rows, rot], rotate-half over
  // the first rot channels of each head) on q and k, then non-causal attention within each
  // segment [segments[i], segments[i + 1]) -> out [rows, heads * head_dim].
  virtual void SegmentAttention(const DeviceTensor& qkv, const DeviceTensor& cos,
                                const DeviceTensor& sin, int64_t rot,
                                std::span<const int64_t> segments, int64_t heads, int64_t head_dim,
                                const DeviceTensor& out) = 0;

  // ---- sampling ----
  // The next token of each row of logits (f32 [rows.size(), vocab]) with rows[i]'s parameters
  // and history, as BatchSampler picks it (the draw CounterUniform(seed, output size)), with
  // the logprobs it asks for; only these come back to the host, never the logits. This default
  // downloads the logits and samples them on the host (backends with a device sampler override).
  virtual void SampleRows(const DeviceTensor& logits, std::span<const SampleRow> rows,
                          std::vector<SampledToken>& out) {
    out.clear();
    if (rows.empty()) return;
    std::vector<float> host(static_cast<size_t>(logits.numel()));
    Download(logits, host.data());
    BatchSampler(logits.numel() / static_cast<int64_t>(rows.size())).Sample(host.data(), rows, out);
  }
};

}  // namespace m3::engine::backend
