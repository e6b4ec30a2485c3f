// LoadM3Weights: the upstream tensor names and the shapes each must have.
#include "engine/minimax_m3/m3_weights.h"

#include <algorithm>
#include <string>

#include "engine/weight_loader.h"
#include "shared/error.h"

namespace m3::engine::minimax_m3 {
namespace {

SwigluMlpWeights LoadMlp(const WeightLoader& w, const std::string& gate, const std::string& up,
                         const std::string& down, int64_t hidden, int64_t inter) {
  SwigluMlpWeights mlp;
  mlp.inter = inter;
  mlp.gate_up = w.Load(gate, {inter, hidden});
  Floats u = w.Load(up, {inter, hidden});
  mlp.gate_up.insert(mlp.gate_up.end(), u.begin(), u.end());
  mlp.down = w.Load(down, {hidden, inter});
  return mlp;
}

void CheckConfig(const ModelConfig& c) {
  const TextConfig& t = c.text;
  auto need = [](bool ok, const std::string& what) {
    Require(ok, ErrorCode::kInvalidArgument, "config.json: " + what);
  };
  need(t.num_key_value_heads > 0 && t.num_attention_heads % t.num_key_value_heads == 0,
       "num_attention_heads must be a multiple of num_key_value_heads");
  bool any_sparse = false;
  for (bool s : t.sparse_attention) any_sparse |= s;
  if (any_sparse) {
    need(t.index_n_heads == t.num_key_value_heads,
         "index_n_heads must equal num_key_value_heads (one block selection per KV group)");
    need(t.index_block_size > 0 && t.index_topk_blocks > 0 && t.index_head_dim > 0,
         "sparse layers need positive index_block_size, index_topk_blocks, index_head_dim");
    need(std::min(t.index_head_dim, t.rotary_dim) % 2 == 0, "index rotary dim must be even");
  }
  bool any_moe = false;
  for (bool m : t.moe_mlp) any_moe |= m;
  if (any_moe)
    need(t.num_experts_per_tok > 0 && t.num_experts_per_tok <= t.num_local_experts,
         "num_experts_per_tok must be in [1, num_local_experts]");
  const VisionConfig& v = c.vision;
  need(v.num_attention_heads > 0 && v.hidden_size % v.num_attention_heads == 0,
       "vision hidden_size must be a multiple of num_attention_heads");
  need(v.spatial_merge_size > 0, "vision spatial_merge_size must be positive");
  int64_t f = (v.head_dim() / 2 + 1) / 2;
  need(4 * f <= v.head_dim(), "vision head_dim too small for the axial rotary layout");
  need(c.image_token_id >= 0 && c.image_token_id < t.vocab_size && c.video_token_id >= 0 &&
           c.video_token_id < t.vocab_size,
       "image/video token ids must be inside the vocabulary");
}

}  // namespace

M3Weights LoadM3Weights(const WeightStore& store, const ModelConfig& config) {
  CheckConfig(config);
  const TextConfig& t = config.text;
  const VisionConfig& v = config.vision;
  WeightLoader w(store);
  M3Weights m;
  const int64_t H = t.hidden_size;
  const std::string lm = "language_model.";
  m.embed_tokens = w.Load(lm + "model.embed_tokens.weight", {t.vocab_size, H});
  m.lm_head = w.Load(lm + "lm_head.weight", {t.vocab_size, H});
  m.final_norm = w.Load(lm + "model.norm.weight", {H});
  for (int64_t i = 0; i < t.num_hidden_layers; ++i) {
    const std::string p = lm + "model.layers." + std::to_string(i) + ".";
    TextLayerWeights L;
    L.sparse_attention = t.sparse_attention[i];
    L.moe = t.moe_mlp[i];
    L.input_norm = w.Load(p + "input_layernorm.weight", {H});
    L.post_attention_norm = w.Load(p + "post_attention_layernorm.weight", {H});
    const std::string a = p + "self_attn.";
    const int64_t D = t.head_dim;
    L.q_proj = w.Load(a + "q_proj.weight", {t.num_attention_heads * D, H});
    L.k_proj = w.Load(a + "k_proj.weight", {t.num_key_value_heads * D, H});
    L.v_proj = w.Load(a + "v_proj.weight", {t.num_key_value_heads * D, H});
    L.o_proj = w.Load(a + "o_proj.weight", {H, t.num_attention_heads * D});
    L.q_norm = w.Load(a + "q_norm.weight", {D});
    L.k_norm = w.Load(a + "k_norm.weight", {D});
    if (L.sparse_attention) {
      L.index_q_proj = w.Load(a + "index_q_proj.weight", {t.index_n_heads * t.index_head_dim, H});
      L.index_k_proj = w.Load(a + "index_k_proj.weight", {t.index_head_dim, H});
      L.index_q_norm = w.Load(a + "index_q_norm.weight", {t.index_head_dim});
      L.index_k_norm = w.Load(a + "index_k_norm.weight", {t.index_head_dim});
    }
    const std::string b = p + "block_sparse_moe.";
    if (L.moe) {
      L.router = w.Load(b + "gate.weight", {t.num_local_experts, H});
      L.router_bias = w.Load(b + "e_score_correction_bias", {t.num_local_experts});
      for (int64_t e = 0; e < t.num_local_experts; ++e) {
        const std::string x = b + "experts." + std::to_string(e) + ".";
        L.experts.push_back(
            LoadMlp(w, x + "w1.weight", x + "w3.weight", x + "w2.weight", H, t.intermediate_size));
      }
      const std::string s = b + "shared_experts.";
      L.shared_expert = LoadMlp(w, s + "gate_proj.weight", s + "up_proj.weight",
                                s + "down_proj.weight", H, t.shared_intermediate_size);
    } else {
      L.dense = LoadMlp(w, b + "gate_proj.weight", b + "up_proj.weight", b + "down_proj.weight", H,
                        t.dense_intermediate_size);
    }
    m.layers.push_back(std::move(L));
  }

  const std::string vm = "vision_tower.vision_model.";
  const int64_t Dv = v.hidden_size;
  m.patch_embed = w.Load(vm + "embeddings.patch_embedding.weight",
                         {Dv, v.num_channels, v.temporal_patch_size, v.patch_size, v.patch_size});
  m.pre_ln_w = w.Load(vm + "pre_layrnorm.weight", {Dv});
  m.pre_ln_b = w.Load(vm + "pre_layrnorm.bias", {Dv});
  for (int64_t i = 0; i < v.num_hidden_layers; ++i) {
    const std::string p = vm + "encoder.layers." + std::to_string(i) + ".";
    VisionLayerWeights L;
    L.ln1_w = w.Load(p + "layer_norm1.weight", {Dv});
    L.ln1_b = w.Load(p + "layer_norm1.bias", {Dv});
    L.ln2_w = w.Load(p + "layer_norm2.weight", {Dv});
    L.ln2_b = w.Load(p + "layer_norm2.bias", {Dv});
    L.q_w = w.Load(p + "self_attn.q_proj.weight", {Dv, Dv});
    L.q_b = w.Load(p + "self_attn.q_proj.bias", {Dv});
    L.k_w = w.Load(p + "self_attn.k_proj.weight", {Dv, Dv});
    L.k_b = w.Load(p + "self_attn.k_proj.bias", {Dv});
    L.v_w = w.Load(p + "self_attn.v_proj.weight", {Dv, Dv});
    L.v_b = w.Load(p + "self_attn.v_proj.bias", {Dv});
    L.out_w = w.Load(p + "self_attn.out_proj.weight", {Dv, Dv});
    L.out_b = w.Load(p + "self_attn.out_proj.bias", {Dv});
    L.fc1_w = w.Load(p + "block_sparse_moe.fc1.weight", {v.intermediate_size, Dv});
    L.fc1_b = w.Load(p + "block_sparse_moe.fc1.bias", {v.intermediate_size});
    L.fc2_w = w.Load(p + "block_sparse_moe.fc2.weight", {Dv, v.intermediate_size});
    L.fc2_b = w.Load(p + "block_sparse_moe.fc2.bias", {Dv});
    m.vision_layers.push_back(std::move(L));
  }
  const int64_t P = config.projector_hidden_size;
  const int64_t merged = v.spatial_merge_size * v.spatial_merge_size * H;
  m.proj1_w = w.Load("multi_modal_projector.linear_1.weight", {P, Dv});
  m.proj1_b = w.Load("multi_modal_projector.linear_1.bias", {P});
  m.proj2_w = w.Load("multi_modal_projector.linear_2.weight", {H, P});
  m.proj2_b = w.Load("multi_modal_projector.linear_2.bias", {H});
  m.merge1_w = w.Load("patch_merge_mlp.linear_1.weight", {P, merged});
  m.merge1_b = w.Load("patch_merge_mlp.linear_1.bias", {P});
  m.merge2_w = w.Load("patch_merge_mlp.linear_2.weight", {H, P});
  m.merge2_b = w.Load("patch_merge_mlp.linear_2.bias", {H});
  return m;
}

}  // namespace m3::engine::minimax_m3
