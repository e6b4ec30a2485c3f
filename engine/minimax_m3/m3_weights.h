// MiniMax-M3 VL weights in float32, loaded from the upstream checkpoint layout (names in
// docs/M3_REFERENCE.md) with every shape checked against the config. Gate and up projections
// are stacked into one [2 * inter, hidden] matrix so each MLP runs one GEMM for both.
#pragma once

#include <cstdint>
#include <vector>

#include "shared/model_config.h"
#include "shared/safetensors.h"

namespace m3::engine::minimax_m3 {

using Floats = std::vector<float>;

struct SwigluMlpWeights {
  int64_t inter = 0;
  Floats gate_up;  // [2 * inter, hidden]: gate rows, then up rows
  Floats down;     // [hidden, inter]
};

struct TextLayerWeights {
  bool sparse_attention = false;
  bool moe = false;
  Floats input_norm, post_attention_norm;  // [hidden]
  Floats q_proj, k_proj, v_proj, o_proj;   // nn.Linear layout
  Floats q_norm, k_norm;                   // [head_dim]
  // Lightning indexer (sparse layers).
  Floats index_q_proj, index_k_proj;  // [index_heads * index_dim, hidden], [index_dim, hidden]
  Floats index_q_norm, index_k_norm;  // [index_dim]
  // Dense MLP (moe == false) or the MoE block.
  SwigluMlpWeights dense;
  Floats router;                          // [experts, hidden]
  Floats router_bias;                     // [experts] e_score_correction_bias
  std::vector<SwigluMlpWeights> experts;  // w1 = gate, w3 = up, w2 = down
  SwigluMlpWeights shared_expert;
};

struct VisionLayerWeights {
  Floats ln1_w, ln1_b, ln2_w, ln2_b;
  Floats q_w, q_b, k_w, k_b, v_w, v_b, out_w, out_b;
  Floats fc1_w, fc1_b, fc2_w, fc2_b;
};

struct M3Weights {
  Floats embed_tokens;  // [vocab, hidden]
  Floats lm_head;       // [vocab, hidden]
  Floats final_norm;    // [hidden]
  std::vector<TextLayerWeights> layers;

  Floats patch_embed;  // [vision_hidden, patch_dim] (the Conv3d kernel, flattened)
  Floats pre_ln_w, pre_ln_b;
  std::vector<VisionLayerWeights> vision_layers;
  Floats proj1_w, proj1_b, proj2_w, proj2_b;      // multi_modal_projector.linear_{1,2}
  Floats merge1_w, merge1_b, merge2_w, merge2_b;  // patch_merge_mlp.linear_{1,2}
};

// Checks the config's structural assumptions, then loads and shape-checks every tensor.
M3Weights LoadM3Weights(const WeightStore& store, const ModelConfig& config);

}  // namespace m3::engine::minimax_m3
