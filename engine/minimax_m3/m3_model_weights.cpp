// LoadM3ModelWeights: the upstream tensor names (the released checkpoint's and transformers
// 5's), the shapes each must have, the fusions, the formats of the Linears.
#include "engine/minimax_m3/m3_model_weights.h"

#include <algorithm>
#include <string>

#include "engine/backend/linear_layout.h"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::minimax_m3 {

namespace {

// The decoder layers of one rank (plan): the fused QKV of its query / KV / index heads (the one
// index key head is replicated), o_proj's columns of its query heads, gate/up rows and down columns
// of its intermediate slice, its experts (or every expert's intermediate slice).
void LoadDecoderLayers(backend::WeightUploader& w, const TextConfig& t, const ShardPlan& plan,
                       M3ModelWeights& m) {
  const int64_t H = t.hidden_size, D = t.head_dim;
  const int64_t Hq = t.num_attention_heads, Hkv = t.num_key_value_heads;
  const int64_t Hi = t.index_n_heads, Di = t.index_head_dim;
  const ShardRange q = plan.q_heads, kv = plan.kv_heads;
  const std::string lm = "language_model.";
  // gate and up rows [r.first, +r.count) of each, then down's matching columns.
  auto gate_up = [&](const std::string& gate, const std::string& up, int64_t inter, ShardRange r) {
    return w.LoadLinear({{gate, {inter, H}, r.first, r.count}, {up, {inter, H}, r.first, r.count}},
                        {2 * r.count, H});
  };
  auto down = [&](const std::string& name, int64_t inter, ShardRange r) {
    return w.LoadLinear({{name, {H, inter}, 0, -1, r.first, r.count}}, {H, r.count});
  };
  // Router biases are zero in dummy weights (the routing is then the router's alone).
  const backend::DummyInit zero{0.0f, 0.0f};
  for (int64_t i = 0; i < t.num_hidden_layers; ++i) {
    const std::string p = lm + "model.layers." + std::to_string(i) + ".";
    M3DecoderLayerWeights L;
    L.sparse_attention = t.sparse_attention[i];
    L.moe = t.moe_mlp[i];
    L.input_norm = w.Load(p + "input_layernorm.weight", {H});
    L.post_attention_norm = w.Load(p + "post_attention_layernorm.weight", {H});
    const std::string a = p + "self_attn.";
    std::vector<backend::WeightSlice> qkv = {
        {a + "q_proj.weight", {Hq * D, H}, q.first * D, q.count * D},
        {a + "k_proj.weight", {Hkv * D, H}, kv.first * D, kv.count * D},
        {a + "v_proj.weight", {Hkv * D, H}, kv.first * D, kv.count * D}};
    int64_t rows = (q.count + 2 * kv.count) * D;
    if (L.sparse_attention) {
      qkv.push_back({a + "index_q_proj.weight", {Hi * Di, H}, kv.first * Di, kv.count * Di});
      qkv.push_back({a + "index_k_proj.weight", {Di, H}});
      rows += (kv.count + 1) * Di;
    }
    L.qkv_proj = w.LoadLinear(qkv, {rows, H});
    L.o_proj = w.LoadLinear({{a + "o_proj.weight", {H, Hq * D}, 0, -1, q.first * D, q.count * D}},
                            {H, q.count * D});
    L.norms.q_norm = w.Load(a + "q_norm.weight", {D});
    L.norms.k_norm = w.Load(a + "k_norm.weight", {D});
    if (L.sparse_attention) {
      L.norms.index_q_norm = w.Load(a + "index_q_norm.weight", {Di});
      L.norms.index_k_norm = w.Load(a + "index_k_norm.weight", {Di});
    }
    const std::string b = p + "block_sparse_moe.";
    if (L.moe) {
      const int64_t E = t.num_local_experts, I = t.intermediate_size;
      const ShardRange ex = plan.experts, ei = plan.expert_inter;
      L.router = w.Load(b + "gate.weight", {E, H});
      L.router_bias = w.Load(b + "e_score_correction_bias", {E}, zero);
      std::vector<backend::WeightSlice> gu, dn;
      for (int64_t e = ex.first; e < ex.first + ex.count; ++e) {
        const std::string x = b + "experts." + std::to_string(e) + ".";
        // Expert-parallel: the world / ep ranks holding this expert read it.
        const int readers = plan.world() / plan.expert_parallel;
        gu.push_back({x + "w1.weight", {I, H}, ei.first, ei.count, 0, -1, readers});
        gu.push_back({x + "w3.weight", {I, H}, ei.first, ei.count, 0, -1, readers});
        dn.push_back({x + "w2.weight", {H, I}, 0, -1, ei.first, ei.count, readers});
      }
      L.experts_gate_up = w.LoadLinear(gu, {ex.count, 2 * ei.count, H});
      L.experts_down = w.LoadLinear(dn, {ex.count, H, ei.count});
      const std::string s = b + "shared_experts.";
      L.shared_gate_up = gate_up(s + "gate_proj.weight", s + "up_proj.weight",
                                 t.shared_intermediate_size, plan.shared_inter);
      L.shared_down = down(s + "down_proj.weight", t.shared_intermediate_size, plan.shared_inter);
    } else {
      // The released checkpoints name the dense MLP `mlp.*`, transformers 5 `block_sparse_moe.*`
      // (dummy weights: the released names, which quantization configs are written against).
      const std::string d = w.dummy() || w.Has(p + "mlp.gate_proj.weight") ? p + "mlp." : b;
      L.mlp_gate_up = gate_up(d + "gate_proj.weight", d + "up_proj.weight",
                              t.dense_intermediate_size, plan.dense_inter);
      L.mlp_down = down(d + "down_proj.weight", t.dense_intermediate_size, plan.dense_inter);
    }
    m.layers.push_back(std::move(L));
  }
}

}  // namespace

void CheckM3Config(const ModelConfig& c) {
  const TextConfig& t = c.text;
  auto need = [](bool ok, const std::string& what) {
    Require(ok, ErrorCode::kInvalidArgument, "config.json: " + what);
  };
  need(t.vocab_size > 0 && t.hidden_size > 0 && t.num_hidden_layers > 0 && t.head_dim > 0,
       "vocab_size, hidden_size, num_hidden_layers and head_dim must be positive");
  need(t.num_key_value_heads > 0 && t.num_attention_heads % t.num_key_value_heads == 0,
       "num_attention_heads must be a multiple of num_key_value_heads");
  need(t.rotary_dim > 0 && t.rotary_dim % 2 == 0 && t.rotary_dim <= t.head_dim,
       "the rotary dimension must be even and at most head_dim");
  need(static_cast<int64_t>(t.sparse_attention.size()) == t.num_hidden_layers &&
           static_cast<int64_t>(t.moe_mlp.size()) == t.num_hidden_layers,
       "layer_types / mlp_layer_types must have num_hidden_layers entries");
  bool any_sparse = std::find(t.sparse_attention.begin(), t.sparse_attention.end(), true) !=
                    t.sparse_attention.end();
  if (any_sparse) {
    need(t.index_n_heads == t.num_key_value_heads,
         "index_n_heads must equal num_key_value_heads (one block selection per KV group)");
    need(t.index_block_size > 0 && t.index_topk_blocks > 0 && t.index_head_dim > 0,
         "sparse layers need positive index_block_size, index_topk_blocks, index_head_dim");
    need(t.index_local_blocks >= 0, "index_local_blocks must be >= 0");
    need(std::min(t.index_head_dim, t.rotary_dim) % 2 == 0, "index rotary dim must be even");
  }
  bool any_moe = std::find(t.moe_mlp.begin(), t.moe_mlp.end(), true) != t.moe_mlp.end();
  if (any_moe)
    need(t.num_experts_per_tok > 0 && t.num_experts_per_tok <= t.num_local_experts,
         "num_experts_per_tok must be in [1, num_local_experts]");
  const VisionConfig& v = c.vision;
  need(v.num_attention_heads > 0 && v.hidden_size % v.num_attention_heads == 0,
       "vision hidden_size must be a multiple of num_attention_heads");
  need(v.spatial_merge_size > 0, "vision spatial_merge_size must be positive");
  need(c.image_token_id >= 0 && c.image_token_id < t.vocab_size && c.video_token_id >= 0 &&
           c.video_token_id < t.vocab_size,
       "image/video token ids must be inside the vocabulary");
}

namespace {

// Every tensor through `w`, which reads a checkpoint or draws dummy weights.
M3ModelWeights LoadWith(backend::WeightUploader& w, const ModelConfig& config, LoadReport& report,
                        const ShardPlan* plan) {
  const TextConfig& t = config.text;
  const VisionConfig& v = config.vision;
  M3ModelWeights m;
  const int64_t H = t.hidden_size;
  const std::string lm = "language_model.";
  // Biases start at zero; the vision tower's LayerNorms (not Gemma's 1 + w) at one.
  const backend::DummyInit zero{0.0f, 0.0f}, one{1.0f, 0.0f};
  m.embed_tokens = w.Load(lm + "model.embed_tokens.weight", {t.vocab_size, H});
  if (plan && plan->vocab_gather)
    m.lm_head = w.LoadLinear(
        {{lm + "lm_head.weight", {t.vocab_size, H}, plan->vocab.first, plan->vocab.count}},
        {plan->vocab.count, H});
  else
    m.lm_head = w.LoadLinear({{lm + "lm_head.weight", {t.vocab_size, H}}}, {t.vocab_size, H});
  m.final_norm = w.Load(lm + "model.norm.weight", {H});
  // One rank holds every head, expert and intermediate column: the same loads, whole ranges.
  const ShardPlan whole = SingleRankPlan(t);
  LoadDecoderLayers(w, t, plan ? *plan : whole, m);

  const std::string vm = "vision_tower.vision_model.";
  const int64_t Dv = v.hidden_size;
  m.patch_embed =
      w.LoadConcat({{vm + "embeddings.patch_embedding.weight",
                     {Dv, v.num_channels, v.temporal_patch_size, v.patch_size, v.patch_size}}},
                   {Dv, v.patch_dim()});
  m.pre_ln_w = w.Load(vm + "pre_layrnorm.weight", {Dv}, one);
  m.pre_ln_b = w.Load(vm + "pre_layrnorm.bias", {Dv}, zero);
  for (int64_t i = 0; i < v.num_hidden_layers; ++i) {
    const std::string p = vm + "encoder.layers." + std::to_string(i) + ".";
    const std::string a = p + "self_attn.";
    M3VisionLayerWeights L;
    L.ln1_w = w.Load(p + "layer_norm1.weight", {Dv}, one);
    L.ln1_b = w.Load(p + "layer_norm1.bias", {Dv}, zero);
    L.ln2_w = w.Load(p + "layer_norm2.weight", {Dv}, one);
    L.ln2_b = w.Load(p + "layer_norm2.bias", {Dv}, zero);
    L.qkv_w = w.LoadConcat({{a + "q_proj.weight", {Dv, Dv}},
                            {a + "k_proj.weight", {Dv, Dv}},
                            {a + "v_proj.weight", {Dv, Dv}}},
                           {3 * Dv, Dv});
    L.qkv_b = w.LoadConcat(
        {{a + "q_proj.bias", {Dv}}, {a + "k_proj.bias", {Dv}}, {a + "v_proj.bias", {Dv}}}, {3 * Dv},
        zero);
    L.out_w = w.Load(a + "out_proj.weight", {Dv, Dv});
    L.out_b = w.Load(a + "out_proj.bias", {Dv}, zero);
    L.fc1_w = w.Load(p + "block_sparse_moe.fc1.weight", {v.intermediate_size, Dv});
    L.fc1_b = w.Load(p + "block_sparse_moe.fc1.bias", {v.intermediate_size}, zero);
    L.fc2_w = w.Load(p + "block_sparse_moe.fc2.weight", {Dv, v.intermediate_size});
    L.fc2_b = w.Load(p + "block_sparse_moe.fc2.bias", {Dv}, zero);
    m.vision_layers.push_back(std::move(L));
  }
  const int64_t P = config.projector_hidden_size;
  const int64_t merged = v.spatial_merge_size * v.spatial_merge_size * H;
  m.proj1_w = w.Load("multi_modal_projector.linear_1.weight", {P, Dv});
  m.proj1_b = w.Load("multi_modal_projector.linear_1.bias", {P}, zero);
  m.proj2_w = w.Load("multi_modal_projector.linear_2.weight", {H, P});
  m.proj2_b = w.Load("multi_modal_projector.linear_2.bias", {H}, zero);
  m.merge1_w = w.Load("patch_merge_mlp.linear_1.weight", {P, merged});
  m.merge1_b = w.Load("patch_merge_mlp.linear_1.bias", {P}, zero);
  m.merge2_w = w.Load("patch_merge_mlp.linear_2.weight", {H, P});
  m.merge2_b = w.Load("patch_merge_mlp.linear_2.bias", {H}, zero);
  report = w.Finish();
  return m;
}

bool IsMtpTensor(const std::string& name) {
  return name.starts_with("language_model.model.mtp.") || name.starts_with("model.mtp.");
}

}  // namespace

M3ModelWeights LoadM3ModelWeights(const WeightStore& store, const ModelConfig& config,
                                  backend::Device& device, LoadReport& report,
                                  const ShardPlan* plan, SharedPageRelease* shared) {
  CheckM3Config(config);
  // Before anything is uploaded: every weight a layout this engine knows, agreeing with the
  // quantization config (an unknown method is refused here too).
  const backend::QuantConfig quant = backend::LoadQuantConfig(store.dir());
  backend::ValidateCheckpoint(store, quant, IsMtpTensor);
  // The multi-token-prediction layers (speculative decoding) are not used.
  if (!plan || plan->rank == 0) {
    int64_t mtp = 0;
    for (const std::string& name : store.Names()) mtp += IsMtpTensor(name);
    if (mtp > 0) Log(LogLevel::kInfo, "skipping the ", mtp, " tensors of the MTP layers");
  }
  backend::WeightUploader w(store, device, shared);
  return LoadWith(w, config, report, plan);
}

M3ModelWeights DrawM3DummyWeights(const ModelConfig& config, const backend::QuantConfig& quant,
                                  backend::Device& device, LoadReport& report,
                                  const ShardPlan* plan) {
  CheckM3Config(config);
  backend::WeightUploader w(device, quant);
  return LoadWith(w, config, report, plan);
}

}  // namespace m3::engine::minimax_m3
