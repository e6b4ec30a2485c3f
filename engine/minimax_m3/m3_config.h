// The MiniMax-M3 VL model configuration, parsed from a Hugging Face config.json (the model's own
// parser; the gateway reads the few fields it needs through shared/model_config_view.h). Accepts
// both key styles found in the wild: the flat keys (index_*, layer_types, mlp_layer_types,
// rope_parameters) and the legacy ones (sparse_attention_config.*, moe_layer_freq, rope_theta,
// rotary_dim). Validates what the engine relies on, so a bad file fails at load, by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/generation_config.h"

namespace m3::engine::minimax_m3 {

struct TextConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // head_dim * partial_rotary_factor: the channels RoPE rotates
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 0;

  // MLPs
  int64_t intermediate_size = 0;         // one routed expert
  int64_t dense_intermediate_size = 0;   // dense-MLP layers
  int64_t shared_intermediate_size = 0;  // the shared expert of MoE layers
  int64_t num_local_experts = 0;
  int64_t num_experts_per_tok = 0;
  double routed_scaling_factor = 1.0;
  double swiglu_alpha = 1.702;
  double swiglu_limit = 7.0;

  // MSA (lightning indexer + block-sparse attention)
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_block_size = 0;
  int64_t index_topk_blocks = 0;
  int64_t index_local_blocks = 0;

  std::vector<bool> sparse_attention;  // per layer: layer_types[i] == "minimax_m3_sparse"
  std::vector<bool> moe_mlp;           // per layer: mlp_layer_types[i] == "sparse"

  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
};

struct VisionConfig {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_channels = 3;
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  double layer_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  // A video's temporal groups are encoded in segments of at most this many (0: one segment).
  int64_t vision_segment_max_frames = 0;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  int64_t patch_dim() const { return num_channels * temporal_patch_size * patch_size * patch_size; }
};

struct ModelConfig {
  std::string model_type;
  TextConfig text;
  VisionConfig vision;
  int64_t image_token_id = -1;
  int64_t video_token_id = -1;
  int64_t projector_hidden_size = 0;
  GenerationConfig generation;  // generation_config.json, when the directory has one

  // The ids generation stops at: generation_config.json's when it names any, else config.json's.
  const std::vector<int64_t>& eos_token_ids() const {
    return generation.eos_token_ids.empty() ? text.eos_token_ids : generation.eos_token_ids;
  }
};

// Parses config.json text; `source` names the file in error messages.
ModelConfig ParseModelConfig(const std::string& json_text, const std::string& source);
// Reads DIR/config.json and, when present, DIR/generation_config.json.
ModelConfig LoadModelConfig(const std::string& model_dir);

}  // namespace m3::engine::minimax_m3
