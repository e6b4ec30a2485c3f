// The MiniMax-M3 text decoder as one graph over the Backend interface, executing a ForwardBatch
// (flat rows of many sequences, decodes first, prefill chunks at any offset) against the paged
// KV storage it owns. Per layer: Gemma RMSNorm (fused with the previous residual add) -> fused
// QKV (+ indexer) projection -> per-head norm + partial RoPE writing K, V and index keys into
// their pages -> full paged attention, or MSA (indexer block selection per KV group + block-
// sparse attention) -> o_proj -> add + RMSNorm -> dense SwiGLU-OAI MLP or sigmoid-routed MoE
// (grouped experts + shared expert); then the final norm and the LM head on logits_rows only.
// The per-step metadata (layout, rotary rows) is built once per step and shared by all layers.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/minimax_m3/m3_model_weights.h"
#include "engine/runtime/model_runner.h"
#include "shared/model_config.h"

namespace m3::engine::minimax_m3 {

class M3DecoderGraph {
 public:
  M3DecoderGraph(const ModelConfig& config, const M3ModelWeights& weights,
                 backend::Backend& backend);

  int64_t KvBytesPerPage(int64_t page_size) const;
  void AllocateKvCache(int64_t num_pages, int64_t page_size);
  int64_t num_pages() const { return num_pages_; }
  int64_t page_size() const { return page_size_; }

  // Throws kInvalidArgument on a malformed batch (see ModelRunner::Execute).
  void Execute(const ForwardBatch& batch, std::vector<float>& logits,
               const CaptureRequest& capture);
  // The same step, handing `take` the float32 logits [logits_rows, vocab] where they lie (valid
  // during the call; not called when no row wants logits): device-side sampling reads them there.
  using LogitsSink = std::function<void(const backend::DeviceTensor&)>;
  void Execute(const ForwardBatch& batch, const LogitsSink& take, const CaptureRequest& capture);

 private:
  void Validate(const ForwardBatch& b) const;

  const ModelConfig& config_;
  const M3ModelWeights& w_;
  backend::Backend& backend_;
  std::vector<float> inv_freq_;  // text rotary
  std::vector<backend::LayerKvCache> kv_;
  int64_t num_pages_ = 0;
  int64_t page_size_ = 0;
};

}  // namespace m3::engine::minimax_m3
