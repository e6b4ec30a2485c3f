// Eagle3DraftModel: an EAGLE-3 draft (vLLM's llama_eagle3 format) on the host in float32: `fc`
// fusing three target hidden states (3 x target width -> hidden), one Llama decoder layer whose
// attention reads [input_layernorm(embedding); hidden_norm(hidden)] (2 x hidden wide), the final
// norm and the reduced-vocabulary lm_head, draft ids mapped to target ids by d2t (target = d +
// d2t[d]). Embeddings are the draft's own (embed_tokens.weight) or, when it has none, the
// target's. Weights: model.safetensors, names as the published drafts have them (layer under
// "midlayer." or "layers.0.", optionally below "model.").
//
// The draft's KV lives in a DraftKv per sequence (positions it has seen; a gap where the
// target's prefix cache spared it rows only narrows what the draft attends to).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/spec/eagle3_config.h"

namespace m3::engine::spec {

// One sequence's draft KV, indexed by position.
struct DraftKv {
  std::vector<float> k, v;      // [positions, kv_heads * head_dim]
  std::vector<uint8_t> filled;  // per position
  // Forgets positions >= `end` (rejected drafts, a recompute after preemption).
  void Truncate(int64_t end);
};

class Eagle3DraftModel {
 public:
  // Throws kInvalidArgument / kNotFound naming a missing or misshapen tensor. target_embedding:
  // [vocab, target width] float32 rows used when the draft has no embed_tokens (may be empty
  // when it has).
  Eagle3DraftModel(const std::string& dir, Eagle3Config config,
                   std::vector<float> target_embedding);

  const Eagle3Config& config() const { return c_; }
  bool has_own_embedding() const { return own_embedding_; }

  // fc over rows of concatenated target hidden states [rows, 3 x target width] -> [rows, hidden].
  void Fuse(const float* aux, int64_t rows, float* out) const;
  // The decoder layer over `rows` consecutive inputs of one sequence: tokens ids[r] at
  // positions[r], hidden in [rows, hidden]; writes their K/V into kv, and returns per row the
  // pre-norm output (the next step's hidden) and the target id of the draft's argmax.
  void Forward(DraftKv& kv, std::span<const int32_t> ids, std::span<const int64_t> positions,
               const float* hidden, std::vector<float>& prenorm, std::vector<int32_t>& next) const;

 private:
  Eagle3Config c_;
  bool own_embedding_ = false;
  std::vector<float> embed_, fc_, input_norm_, hidden_norm_, q_, k_, v_, o_, post_norm_;
  std::vector<float> gate_, up_, down_, norm_, lm_head_;
  std::vector<int64_t> d2t_;
  std::vector<float> inv_freq_;
};

}  // namespace m3::engine::spec
