// The MiniMax-M3 text decoder on the CPU: per layer, Gemma RMSNorm -> attention (full, or MSA:
// lightning-indexer block selection + block-sparse attention) -> residual -> RMSNorm -> dense
// SwiGLU-OAI MLP or sigmoid-routed MoE with a shared expert -> residual; then the final norm.
// The same code serves prefill (many tokens) and decode (one token): new tokens are appended
// to the sequence's caches and attend to everything cached before them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/minimax_m3/m3_weights.h"
#include "engine/model.h"
#include "shared/model_config.h"

namespace m3::engine::minimax_m3 {

class M3Sequence : public Sequence {
 public:
  explicit M3Sequence(const TextConfig& t);
  int64_t length() const override { return length_; }

  std::vector<LayerKvCache> caches;  // one per decoder layer
  int64_t length_ = 0;
};

struct DecoderCapture {
  bool hidden_states = false;
  bool block_indices = false;
  NamedTensors* out = nullptr;
};

// h: [tokens, hidden] embeddings of tokens at positions seq.length() ... ; on return h holds
// the final-normed hidden states and the sequence has grown by `tokens`.
void RunDecoder(const M3Weights& w, const TextConfig& t, M3Sequence& seq, std::vector<float>& h,
                int64_t tokens, const DecoderCapture& capture);

}  // namespace m3::engine::minimax_m3
