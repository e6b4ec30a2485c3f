// Eagle3Config: config.json parsing and checks.
#include "engine/spec/eagle3_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"

namespace m3::engine::spec {
namespace {

int64_t Int(const nlohmann::json& j, const char* key, int64_t fallback, const std::string& src) {
  if (!j.contains(key) || j[key].is_null()) {
    Require(fallback >= 0, ErrorCode::kInvalidArgument, src + ": '" + key + "' is missing");
    return fallback;
  }
  Require(j[key].is_number_integer(), ErrorCode::kInvalidArgument,
          src + ": '" + key + "' must be an integer");
  return j[key].get<int64_t>();
}

}  // namespace

Eagle3Config LoadEagle3Config(const std::string& dir, int64_t target_layers, int64_t target_hidden,
                              int64_t target_vocab) {
  const std::string src = (std::filesystem::path(dir) / "config.json").string();
  const nlohmann::json j = ParseJsonObject(ReadTextFile(src), src);
  Eagle3Config c;
  c.hidden_size = Int(j, "hidden_size", -1, src);
  c.num_heads = Int(j, "num_attention_heads", -1, src);
  c.num_kv_heads = Int(j, "num_key_value_heads", c.num_heads, src);
  Require(c.hidden_size > 0 && c.num_heads > 0 && c.num_kv_heads > 0 &&
              c.num_heads % c.num_kv_heads == 0,
          ErrorCode::kInvalidArgument,
          src +
              ": hidden_size, num_attention_heads and num_key_value_heads must be positive, "
              "the heads a multiple of the KV heads");
  c.head_dim = Int(j, "head_dim", c.hidden_size / c.num_heads, src);
  c.intermediate_size = Int(j, "intermediate_size", -1, src);
  const int64_t layers = Int(j, "num_hidden_layers", 1, src);
  Require(layers == 1, ErrorCode::kInvalidArgument,
          src + ": num_hidden_layers " + std::to_string(layers) +
              ": only single-layer EAGLE-3 drafts are supported");
  if (j.contains("rms_norm_eps")) c.rms_norm_eps = j["rms_norm_eps"].get<double>();
  if (j.contains("rope_theta")) c.rope_theta = j["rope_theta"].get<double>();
  c.vocab_size = Int(j, "vocab_size", target_vocab, src);
  Require(c.vocab_size == target_vocab, ErrorCode::kInvalidArgument,
          src + ": vocab_size " + std::to_string(c.vocab_size) + " differs from the target's " +
              std::to_string(target_vocab));
  c.draft_vocab_size = Int(j, "draft_vocab_size", c.vocab_size, src);
  c.target_hidden_size = Int(j, "target_hidden_size", target_hidden, src);
  Require(c.target_hidden_size == target_hidden, ErrorCode::kInvalidArgument,
          src + ": target_hidden_size " + std::to_string(c.target_hidden_size) +
              " differs from the target's hidden size " + std::to_string(target_hidden));
  c.norm_before_residual = j.value("norm_before_residual", false);
  if (j.contains("eagle_config") &&
      j["eagle_config"].contains("eagle_aux_hidden_state_layer_ids")) {
    for (const auto& v : j["eagle_config"]["eagle_aux_hidden_state_layer_ids"])
      c.aux_layers.push_back(v.get<int64_t>());
  } else {
    c.aux_layers = {2, target_layers / 2, target_layers - 3};
  }
  Require(c.aux_layers.size() == 3, ErrorCode::kInvalidArgument,
          src + ": eagle_aux_hidden_state_layer_ids must name 3 layers");
  for (int64_t l : c.aux_layers)
    Require(l >= 0 && l < target_layers, ErrorCode::kInvalidArgument,
            src + ": auxiliary hidden state layer " + std::to_string(l) +
                " is not a layer of the " + std::to_string(target_layers) + "-layer target");
  Require(c.head_dim > 0 && c.head_dim % 2 == 0 && c.intermediate_size > 0 &&
              c.draft_vocab_size > 0 && c.draft_vocab_size <= c.vocab_size,
          ErrorCode::kInvalidArgument,
          src +
              ": head_dim (even), intermediate_size and draft_vocab_size (at most vocab_size) "
              "must be positive");
  return c;
}

}  // namespace m3::engine::spec
