// RandomM3Config: the upstream config.json layout (text_config, vision_config) from the widths.
#include "tests/bench/random_m3_config.h"

namespace m3::bench {

RandomM3Shape FullSizeM3Shape() {
  RandomM3Shape s;
  s.layers = 60;
  s.dense_layers = 3;
  s.max_position = 524288;
  s.rope_theta = 5000000.0;
  s.vision_hidden = 1280;
  s.vision_layers = 32;
  s.vision_heads = 16;
  s.vision_inter = 5120;
  s.projector = 6144;
  s.mtp_modules = 1;
  // The M3 chat tokenizer's ids (tests/data/m3-chat: 32000 ids, within the 200064 vocabulary),
  // which the full-size model directories carry so the gateway can serve them.
  s.image_token = 6;
  s.video_token = 7;
  s.bos = 3;
  s.eos = 2;
  return s;
}

nlohmann::json RandomM3Config(const RandomM3Shape& w) {
  using nlohmann::json;
  json text = {
      {"model_type", "minimax_m3_vl_text"},
      {"hidden_size", w.hidden},
      {"num_hidden_layers", w.layers},
      {"num_attention_heads", w.heads},
      {"num_key_value_heads", w.kv_heads},
      {"head_dim", w.head_dim},
      {"intermediate_size", w.expert_inter},
      {"dense_intermediate_size", w.dense_inter},
      {"shared_intermediate_size", w.shared_inter},
      {"num_local_experts", w.experts},
      {"num_experts_per_tok", w.topk},
      {"vocab_size", w.vocab},
      {"max_position_embeddings", w.max_position},
      {"rms_norm_eps", 1e-6},
      {"hidden_act", "silu"},
      {"index_block_size", w.index_block},
      {"index_head_dim", w.index_head_dim},
      {"index_n_heads", w.index_heads},
      {"index_local_blocks", 1},
      {"index_topk_blocks", w.index_topk},
      {"rope_parameters",
       {{"partial_rotary_factor", 0.5}, {"rope_theta", w.rope_theta}, {"rope_type", "default"}}},
      {"rotary_dim", w.head_dim / 2},
      {"routed_scaling_factor", 2.0},
      {"swiglu_alpha", 1.702},
      {"swiglu_limit", 7.0},
      {"tie_word_embeddings", false},
      {"bos_token_id", w.bos_id()},
      {"eos_token_id", w.eos_id()},
  };
  if (w.mtp_modules > 0) text["num_mtp_modules"] = w.mtp_modules;
  json layer_types = json::array(), mlp_types = json::array();
  for (int64_t i = 0; i < w.layers; ++i) {
    layer_types.push_back(w.full_attention(i) ? "full_attention" : "minimax_m3_sparse");
    mlp_types.push_back(w.dense(i) ? "dense" : "sparse");
  }
  text["layer_types"] = layer_types;
  text["mlp_layer_types"] = mlp_types;
  json vision = {{"model_type", "minimax_m3_vl_vision"},
                 {"hidden_size", w.vision_hidden},
                 {"intermediate_size", w.vision_mlp()},
                 {"num_attention_heads", w.vision_heads},
                 {"num_hidden_layers", w.vision_layers},
                 {"num_channels", 3},
                 {"patch_size", 14},
                 {"temporal_patch_size", 2},
                 {"spatial_merge_size", 2},
                 {"image_size", 2016},
                 {"hidden_act", "gelu"},
                 {"layer_norm_eps", 1e-5},
                 {"vision_segment_max_frames", 2},
                 {"rope_parameters", {{"rope_theta", 10000.0}, {"rope_type", "axial"}}}};
  return {{"architectures", {"MiniMaxM3SparseForConditionalGeneration"}},
          {"model_type", "minimax_m3_vl"},
          {"dtype", "bfloat16"},
          {"image_token_index", w.image_id()},
          {"video_token_index", w.video_id()},
          {"projector_hidden_size", w.projector},
          {"merged_hidden_size", 4 * w.hidden},
          {"tie_word_embeddings", false},
          {"text_config", text},
          {"vision_config", vision}};
}

}  // namespace m3::bench
