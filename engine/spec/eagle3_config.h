// Eagle3Config: an EAGLE-3 draft model's config.json as vLLM's llama_eagle3 reads it: a Llama
// config (hidden_size, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
// rms_norm_eps, rope_theta, vocab_size, num_hidden_layers = 1) plus draft_vocab_size (the
// reduced vocabulary of lm_head, mapped to target ids by d2t), target_hidden_size (the target's
// width, when it differs) and eagle_config.eagle_aux_hidden_state_layer_ids: the three target
// decoder layers whose inputs (the residual stream) are fused by `fc` (3 target widths -> hidden).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace m3::engine::spec {

struct Eagle3Config {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000;
  int64_t vocab_size = 0;        // the target's vocabulary (embeddings, ids drafts map to)
  int64_t draft_vocab_size = 0;  // lm_head rows
  int64_t target_hidden_size = 0;
  std::vector<int64_t> aux_layers;  // target decoder layers whose inputs fc fuses
  bool norm_before_residual = false;
};

// Reads DIR/config.json; target_layers and target_hidden (the target model's) fill the defaults
// (aux layers 2, L / 2, L - 3 as vLLM picks them; target width = hidden_size) and are checked
// against (aux layers inside the target). Throws kInvalidArgument naming the field.
Eagle3Config LoadEagle3Config(const std::string& dir, int64_t target_layers, int64_t target_hidden,
                              int64_t target_vocab);

}  // namespace m3::engine::spec
