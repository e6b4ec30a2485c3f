// config.json parsing for MiniMax-M3 VL (flat and legacy key styles) with validation.
#include "engine/minimax_m3/m3_config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"

namespace m3::engine::minimax_m3 {
namespace {

using nlohmann::json;

class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  bool Has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  int64_t Int(const char* key) const {
    Require(Has(key), ErrorCode::kInvalidArgument, where_ + ": missing required key '" + key + "'");
    return IntValue(j_[key], key);
  }
  int64_t Int(const char* key, int64_t fallback) const {
    return Has(key) ? IntValue(j_[key], key) : fallback;
  }

  double Num(const char* key, double fallback) const {
    if (!Has(key)) return fallback;
    Require(j_[key].is_number(), ErrorCode::kInvalidArgument,
            where_ + ": '" + key + "' must be a number, got " + j_[key].dump());
    return j_[key].get<double>();
  }

  std::vector<bool> Flags(const char* key, const char* on, const char* off) const {
    std::vector<bool> out;
    const json& v = j_[key];
    Require(v.is_array(), ErrorCode::kInvalidArgument, where_ + ": '" + key + "' must be a list");
    for (const auto& e : v) {
      if (e.is_string() && e.get<std::string>() == on) {
        out.push_back(true);
      } else if (e.is_string() && e.get<std::string>() == off) {
        out.push_back(false);
      } else if (e.is_number_integer() || e.is_boolean()) {  // legacy 0/1 frequency lists
        out.push_back(e.is_boolean() ? e.get<bool>() : e.get<int64_t>() != 0);
      } else {
        throw Error(ErrorCode::kInvalidArgument, where_ + ": '" + key + "' has entry " + e.dump() +
                                                     "; expected \"" + on + "\" or \"" + off +
                                                     "\"");
      }
    }
    return out;
  }

  const std::string& where() const { return where_; }

 private:
  int64_t IntValue(const json& v, const char* key) const {
    Require(v.is_number_integer() ||
                (v.is_number_float() && v.get<double>() == (int64_t)v.get<double>()),
            ErrorCode::kInvalidArgument,
            where_ + ": '" + key + "' must be an integer, got " + v.dump());
    return v.get<int64_t>();
  }

  const json& j_;
  std::string where_;
};

void RequirePositive(const std::string& where, const char* key, int64_t v) {
  Require(v > 0, ErrorCode::kInvalidArgument,
          where + ": '" + key + "' must be positive, got " + std::to_string(v));
}

void RequireFinitePositive(const std::string& where, const char* key, double v) {
  Require(std::isfinite(v) && v > 0, ErrorCode::kInvalidArgument,
          where + ": '" + key + "' must be a positive finite number, got " + std::to_string(v));
}

TextConfig ParseText(const json& tj, const std::string& where) {
  Reader r(tj, where);
  TextConfig t;
  t.vocab_size = r.Int("vocab_size");
  t.hidden_size = r.Int("hidden_size");
  t.num_hidden_layers = r.Int("num_hidden_layers");
  t.num_attention_heads = r.Int("num_attention_heads");
  t.num_key_value_heads = r.Int("num_key_value_heads", t.num_attention_heads);
  t.head_dim =
      r.Int("head_dim", t.num_attention_heads > 0 ? t.hidden_size / t.num_attention_heads : 0);
  t.rms_norm_eps = r.Num("rms_norm_eps", 1e-6);
  t.max_position_embeddings = r.Int("max_position_embeddings", 0);

  // RoPE: rope_parameters{rope_theta, partial_rotary_factor} or legacy rope_theta / rotary_dim.
  double partial = 1.0;
  if (r.Has("rope_parameters")) {
    Reader rp(tj["rope_parameters"], where + ".rope_parameters");
    t.rope_theta = rp.Num("rope_theta", r.Num("rope_theta", 10000.0));
    if (rp.Has("partial_rotary_factor")) {
      partial = rp.Num("partial_rotary_factor", 1.0);
    } else if (r.Has("rotary_dim")) {
      partial = static_cast<double>(r.Int("rotary_dim")) / static_cast<double>(t.head_dim);
    }
    if (rp.Has("rope_type")) {
      std::string type = tj["rope_parameters"]["rope_type"].is_string()
                             ? tj["rope_parameters"]["rope_type"].get<std::string>()
                             : "";
      Require(type == "default", ErrorCode::kUnsupported,
              where + ": rope_type '" + type + "' is not supported (only 'default')");
    }
  } else {
    t.rope_theta = r.Num("rope_theta", 10000.0);
    if (r.Has("rotary_dim")) {
      partial = static_cast<double>(r.Int("rotary_dim")) / static_cast<double>(t.head_dim);
    } else if (r.Has("partial_rotary_factor")) {
      partial = r.Num("partial_rotary_factor", 1.0);
    }
  }
  // The reference computes int(head_dim * partial_rotary_factor).
  t.rotary_dim = static_cast<int64_t>(static_cast<double>(t.head_dim) * partial);

  t.intermediate_size = r.Int("intermediate_size");
  t.dense_intermediate_size = r.Int("dense_intermediate_size", t.intermediate_size);
  t.shared_intermediate_size = r.Int("shared_intermediate_size", t.intermediate_size);
  t.num_local_experts = r.Int("num_local_experts", r.Int("num_experts", 0));
  t.num_experts_per_tok = r.Int("num_experts_per_tok", 0);
  t.routed_scaling_factor = r.Num("routed_scaling_factor", 1.0);
  t.swiglu_alpha = r.Num("swiglu_alpha", 1.702);
  t.swiglu_limit = r.Num("swiglu_limit", 7.0);

  // MSA: flat keys win; the legacy sparse_attention_config block fills what they lack.
  static const json kEmpty = json::object();
  const json& legacy =
      tj.contains("sparse_attention_config") && tj["sparse_attention_config"].is_object()
          ? tj["sparse_attention_config"]
          : kEmpty;
  Reader lr(legacy, where + ".sparse_attention_config");
  t.index_n_heads = r.Int("index_n_heads", lr.Int("sparse_num_index_heads", 0));
  t.index_head_dim = r.Int("index_head_dim", lr.Int("sparse_index_dim", 0));
  t.index_block_size = r.Int("index_block_size", lr.Int("sparse_block_size", 0));
  t.index_topk_blocks = r.Int("index_topk_blocks", lr.Int("sparse_topk_blocks", 0));
  t.index_local_blocks = r.Int("index_local_blocks", lr.Int("sparse_local_block", 1));

  if (r.Has("layer_types")) {
    t.sparse_attention = r.Flags("layer_types", "minimax_m3_sparse", "full_attention");
  } else if (lr.Has("sparse_attention_freq")) {
    t.sparse_attention = lr.Flags("sparse_attention_freq", "minimax_m3_sparse", "full_attention");
  } else {
    t.sparse_attention.assign(static_cast<size_t>(t.num_hidden_layers), false);
  }
  if (r.Has("mlp_layer_types")) {
    t.moe_mlp = r.Flags("mlp_layer_types", "sparse", "dense");
  } else if (r.Has("moe_layer_freq")) {
    t.moe_mlp = r.Flags("moe_layer_freq", "sparse", "dense");
  } else {
    t.moe_mlp.assign(static_cast<size_t>(t.num_hidden_layers), true);
  }

  t.bos_token_id = r.Int("bos_token_id", -1);
  if (r.Has("eos_token_id")) {
    const json& e = tj["eos_token_id"];
    if (e.is_array()) {
      for (const auto& x : e) t.eos_token_ids.push_back(x.get<int64_t>());
    } else {
      t.eos_token_ids.push_back(r.Int("eos_token_id"));
    }
  }

  // Validation of everything the engine indexes with.
  RequirePositive(where, "vocab_size", t.vocab_size);
  RequirePositive(where, "hidden_size", t.hidden_size);
  RequirePositive(where, "num_hidden_layers", t.num_hidden_layers);
  RequirePositive(where, "num_attention_heads", t.num_attention_heads);
  RequirePositive(where, "num_key_value_heads", t.num_key_value_heads);
  RequirePositive(where, "head_dim", t.head_dim);
  RequireFinitePositive(where, "rope_theta", t.rope_theta);
  RequireFinitePositive(where, "rms_norm_eps", t.rms_norm_eps);
  Require(t.max_position_embeddings >= 0, ErrorCode::kInvalidArgument,
          where + ": 'max_position_embeddings' must not be negative");
  Require(t.num_attention_heads % t.num_key_value_heads == 0, ErrorCode::kInvalidArgument,
          where + ": num_attention_heads must be a multiple of num_key_value_heads");
  Require(t.rotary_dim >= 0 && t.rotary_dim <= t.head_dim && t.rotary_dim % 2 == 0,
          ErrorCode::kInvalidArgument,
          where + ": rotary dimension " + std::to_string(t.rotary_dim) +
              " must be even and at most head_dim " + std::to_string(t.head_dim));
  Require(t.sparse_attention.size() == static_cast<size_t>(t.num_hidden_layers),
          ErrorCode::kInvalidArgument,
          where + ": layer_types has " + std::to_string(t.sparse_attention.size()) +
              " entries for " + std::to_string(t.num_hidden_layers) + " layers");
  Require(t.moe_mlp.size() == static_cast<size_t>(t.num_hidden_layers), ErrorCode::kInvalidArgument,
          where + ": mlp_layer_types has " + std::to_string(t.moe_mlp.size()) + " entries for " +
              std::to_string(t.num_hidden_layers) + " layers");
  bool any_sparse = false, any_moe = false;
  for (bool b : t.sparse_attention) any_sparse |= b;
  for (bool b : t.moe_mlp) any_moe |= b;
  if (any_sparse) {
    RequirePositive(where, "index_n_heads", t.index_n_heads);
    RequirePositive(where, "index_head_dim", t.index_head_dim);
    RequirePositive(where, "index_block_size", t.index_block_size);
    RequirePositive(where, "index_topk_blocks", t.index_topk_blocks);
    Require(t.index_local_blocks >= 0, ErrorCode::kInvalidArgument,
            where + ": index_local_blocks must not be negative");
    Require(t.index_n_heads == t.num_key_value_heads, ErrorCode::kInvalidArgument,
            where + ": index_n_heads (" + std::to_string(t.index_n_heads) +
                ") must equal num_key_value_heads (" + std::to_string(t.num_key_value_heads) +
                "): each index head selects the blocks of one KV group");
  }
  if (any_moe) {
    RequirePositive(where, "num_local_experts", t.num_local_experts);
    RequirePositive(where, "num_experts_per_tok", t.num_experts_per_tok);
    Require(t.num_experts_per_tok <= t.num_local_experts, ErrorCode::kInvalidArgument,
            where + ": num_experts_per_tok exceeds num_local_experts");
    RequirePositive(where, "intermediate_size", t.intermediate_size);
    RequirePositive(where, "shared_intermediate_size", t.shared_intermediate_size);
  }
  return t;
}

// The released checkpoint spells some vision keys differently from transformers 5
// (img_token_compression_config.*, a flat rope_theta, rope_mode / position_embedding_type):
// both forms are read, transformers' winning where both are present.
VisionConfig ParseVision(const json& vj, const json& top, const std::string& where) {
  Reader r(vj, where);
  VisionConfig v;
  v.hidden_size = r.Int("hidden_size");
  v.intermediate_size = r.Int("intermediate_size");
  v.num_hidden_layers = r.Int("num_hidden_layers");
  v.num_attention_heads = r.Int("num_attention_heads");
  v.num_channels = r.Int("num_channels", 3);
  v.patch_size = r.Int("patch_size", 14);
  static const json kEmpty = json::object();
  const json& compression =
      vj.contains("img_token_compression_config") && vj["img_token_compression_config"].is_object()
          ? vj["img_token_compression_config"]
          : kEmpty;
  Reader cr(compression, where + ".img_token_compression_config");
  v.temporal_patch_size = r.Int("temporal_patch_size", cr.Int("temporal_patch_size", 2));
  v.spatial_merge_size = r.Int("spatial_merge_size", cr.Int("spatial_merge_size", 2));
  v.layer_norm_eps = r.Num("layer_norm_eps", 1e-5);
  if (r.Has("rope_parameters")) {
    v.rope_theta = Reader(vj["rope_parameters"], where + ".rope_parameters")
                       .Num("rope_theta", r.Num("rope_theta", 10000.0));
  } else {
    v.rope_theta = r.Num("rope_theta", 10000.0);
  }
  // Absent (or null / 0): a video is one segment, as the model's code does without the key.
  Reader tr(top, where);
  v.vision_segment_max_frames =
      r.Int("vision_segment_max_frames", tr.Int("vision_segment_max_frames", 0));
  for (const char* key : {"rope_mode", "position_embedding_type"}) {
    if (!r.Has(key)) continue;
    Require(vj[key].is_string(), ErrorCode::kInvalidArgument,
            where + ": '" + key + "' must be a string, got " + vj[key].dump());
    const std::string value = vj[key].get<std::string>();
    const std::string want = std::string(key) == "rope_mode" ? "3d" : "rope";
    Require(value == want, ErrorCode::kUnsupported,
            where + ": " + key + " '" + value + "' is not supported (only '" + want + "')");
  }
  for (auto [key, value] : {std::pair{"hidden_size", v.hidden_size},
                            {"intermediate_size", v.intermediate_size},
                            {"num_hidden_layers", v.num_hidden_layers},
                            {"num_attention_heads", v.num_attention_heads},
                            {"num_channels", v.num_channels},
                            {"patch_size", v.patch_size},
                            {"temporal_patch_size", v.temporal_patch_size},
                            {"spatial_merge_size", v.spatial_merge_size}}) {
    RequirePositive(where, key, value);
  }
  Require(v.vision_segment_max_frames >= 0, ErrorCode::kInvalidArgument,
          where + ": 'vision_segment_max_frames' must not be negative");
  RequireFinitePositive(where, "rope_theta", v.rope_theta);
  RequireFinitePositive(where, "layer_norm_eps", v.layer_norm_eps);
  Require(v.hidden_size % v.num_attention_heads == 0, ErrorCode::kInvalidArgument,
          where + ": hidden_size must be a multiple of num_attention_heads");
  Require(v.patch_size <= 1024 && v.temporal_patch_size <= 64 && v.spatial_merge_size <= 64 &&
              v.num_channels <= 64,
          ErrorCode::kInvalidArgument,
          where +
              ": patch_size, temporal_patch_size, spatial_merge_size or num_channels is "
              "implausibly large");
  return v;
}

}  // namespace

ModelConfig ParseModelConfig(const std::string& json_text, const std::string& source) {
  json j = ParseJsonObject(json_text, source);
  Require(j.contains("text_config") && j["text_config"].is_object(), ErrorCode::kInvalidArgument,
          source + ": missing 'text_config' (is this a MiniMax-M3 VL checkpoint?)");
  Require(j.contains("vision_config") && j["vision_config"].is_object(),
          ErrorCode::kInvalidArgument, source + ": missing 'vision_config'");
  ModelConfig c;
  c.model_type = j.value("model_type", std::string());
  c.text = ParseText(j["text_config"], source + ": text_config");
  c.vision = ParseVision(j["vision_config"], j, source + ": vision_config");
  Reader r(j, source);
  c.image_token_id = r.Int("image_token_index", r.Int("image_token_id", -1));
  c.video_token_id = r.Int("video_token_index", r.Int("video_token_id", -1));
  c.projector_hidden_size = r.Int("projector_hidden_size");
  RequirePositive(source, "projector_hidden_size", c.projector_hidden_size);
  for (auto [key, id] : {std::pair{"image_token_index", c.image_token_id},
                         {"video_token_index", c.video_token_id}}) {
    Require(id >= 0 && id < c.text.vocab_size, ErrorCode::kInvalidArgument,
            source + ": '" + key + "' " + std::to_string(id) + " is outside the vocabulary");
  }
  return c;
}

ModelConfig LoadModelConfig(const std::string& model_dir) {
  std::filesystem::path p = std::filesystem::path(model_dir) / "config.json";
  ModelConfig c = ParseModelConfig(ReadTextFile(p), p.string());
  c.generation = LoadGenerationConfig(model_dir);
  for (int64_t id : c.generation.eos_token_ids) {
    Require(id < c.text.vocab_size, ErrorCode::kInvalidArgument,
            model_dir + "/generation_config.json: eos_token_id " + std::to_string(id) +
                " is outside the vocabulary");
  }
  return c;
}

}  // namespace m3::engine::minimax_m3
