// The MiniMax-M3 text decoder as one graph over the M3Ops of a Device, executing a ForwardBatch
// (flat rows of many sequences, decodes first, prefill chunks at any offset) against the paged
// KV storage it owns. Per layer: Gemma RMSNorm (fused with the previous residual add) -> fused
// QKV (+ indexer) projection -> per-head norm + partial RoPE writing K, V and index keys into
// their pages -> full paged attention, or MSA (indexer block selection per KV group + block-
// sparse attention) -> o_proj -> add + RMSNorm -> dense SwiGLU-OAI MLP or sigmoid-routed MoE
// (grouped experts + shared expert); then the final norm and the LM head on logits_rows only.
// The per-step metadata (layout, rotary rows) is built once per step and shared by all layers.
// Step activations come from the device's step workspace, sized once when the KV cache is
// allocated; decode-only steps replay recorded graphs (decode_graph_cache.h) when enabled.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "engine/backend/decode_graph_cache.h"
#include "engine/backend/device.h"
#include "engine/backend/m3_ops.h"
#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_model_weights.h"
#include "engine/minimax_m3/m3_shard_plan.h"
#include "engine/parallel/communicator.h"
#include "engine/step/model_runner.h"

namespace m3::engine::minimax_m3 {

// What the step workspace and the decode graphs are sized for (RunnerOptions).
struct DecoderStepLimits {
  int64_t max_num_seqs = 64;
  int64_t max_batched_tokens = 2048;
  int64_t max_logits_per_seq = 1;  // speculative verify steps: 1 + drafts
  // Decode-only steps run at their bucket's padded shape (DecodeGraphCache) rather than their
  // own; with graphs they are recorded and replayed, without they run op by op at that shape,
  // so turning graphs off changes no result.
  bool decode_buckets = false;
  bool graphs = false;  // record decode steps (on devices that can; implies decode_buckets)
  // MSA index keys cached as FP8 (e4m3 + one scale per key) instead of the activation dtype.
  bool fp8_index_keys = false;
  // K and V pages as FP8 e4m3 codes + one float32 scale per (slot, kv head) (LayerKvCache).
  bool fp8_kv_cache = false;
  // Decoder-layer inputs a graph-replayed step keeps for a hidden-state capture (speculative
  // drafts read a few layers: EAGLE-3's three): room for them in the step workspace.
  int64_t graph_hidden_layers = 0;
};

class M3DecoderGraph {
 public:
  // With a plan of several ranks and their communicator, this graph is one rank's: weights are
  // its slices (LoadM3ModelWeights with the plan), its KV cache holds its KV heads, the row-
  // parallel outputs (o_proj where attention is split, every MLP / MoE layer) are summed by an
  // AllReduce, the LM head is the rank's vocabulary rows with the logits gathered (or, where
  // the ranks do not divide the vocabulary, rank 0's alone), and only rank 0's logits sink is
  // called.
  // Null plan / communicator: a single rank, no collectives.
  M3DecoderGraph(const ModelConfig& config, const M3ModelWeights& weights, backend::Device& device,
                 backend::M3Ops& ops, const DecoderStepLimits& limits = {},
                 const ShardPlan* plan = nullptr, parallel::Communicator* comm = nullptr);

  int64_t KvBytesPerPage(int64_t page_size) const;
  // Also (re)sizes the step workspace and resets the recorded decode graphs. With graphs on,
  // one page beyond num_pages takes the padding rows' K/V.
  void AllocateKvCache(int64_t num_pages, int64_t page_size);
  int64_t num_pages() const { return num_pages_; }
  int64_t page_size() const { return page_size_; }
  // Layer `layer`'s paged KV storage (benchmarks fill it with random contexts).
  const backend::LayerKvCache& kv_cache(size_t layer) const { return kv_.at(layer); }
  const backend::DecodeGraphCache* decode_graphs() const { return graphs_.get(); }

  // Throws kInvalidArgument on a malformed batch (see ModelRunner::Execute).
  void Execute(const ForwardBatch& batch, std::vector<float>& logits,
               const CaptureRequest& capture);
  // The same step, handing `take` the float32 logits [logits_rows, vocab] where they lie (valid
  // during the call; not called when no row wants logits): device-side sampling reads them there.
  using LogitsSink = std::function<void(const backend::DeviceTensor&)>;
  void Execute(const ForwardBatch& batch, const LogitsSink& take, const CaptureRequest& capture);

 private:
  void Validate(const ForwardBatch& b) const;
  // The device part of a step: embeddings (media spans of `media`), the layers, the final norm
  // and the LM head on `logits_rows` (null: every row), returning float32 logits.
  // `keep` (recordable): copies of the inputs of decoder layers keep_layers[i] ([rows, hidden],
  // step workspace), appended in that order, for a graph-replayed step's hidden-state capture.
  backend::DeviceTensor Forward(const backend::StepMetadata& meta, const backend::DeviceTensor& ids,
                                const std::vector<MediaSpan>& media,
                                const std::vector<int32_t>* logits_rows,
                                const CaptureRequest& capture,
                                const std::vector<int64_t>* keep_layers = nullptr,
                                std::vector<backend::DeviceTensor>* keep = nullptr);
  // Bytes of step workspace that Forward (and the metadata upload) take at most for a step of
  // `rows` rows, `seqs` sequences, block tables `width` pages wide and `logit_rows` logits rows.
  size_t StepWorkspaceBytes(int64_t rows, int64_t seqs, int64_t width, int64_t logit_rows) const;

  bool takes_logits() const { return !comm_ || comm_->rank() == 0; }

  const ModelConfig& config_;
  const M3ModelWeights& w_;
  backend::Device& device_;
  backend::M3Ops& ops_;
  ShardPlan plan_;
  parallel::Communicator* comm_ = nullptr;
  // Local widths: the config's on a single rank.
  int64_t q_heads_, kv_heads_, index_heads_, dense_inter_, shared_inter_;
  std::vector<float> inv_freq_;  // text rotary
  std::vector<backend::LayerKvCache> kv_;
  int64_t num_pages_ = 0;
  int64_t page_size_ = 0;
  DecoderStepLimits limits_;
  std::unique_ptr<backend::DecodeGraphCache> graphs_;  // null: graphs off
  // Rows (and logits rows) of the largest verify step the workspace holds at a bucket's shape.
  int64_t graph_verify_rows_ = 0;
  // Per bucket (sequences, width, rows per sequence): the kept layer inputs of its recorded
  // forward (valid after each replay until the next step), for hidden-state captures.
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<backend::DeviceTensor>> graph_kept_;
};

}  // namespace m3::engine::minimax_m3
