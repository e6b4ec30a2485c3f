// ModelConfigView: the keys the MiniMax-M3 parser reads for these fields, in the same order of
// precedence (image_token_index before image_token_id; a vision key before its
// img_token_compression_config twin), each checked for its type.
#include "shared/model_config_view.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"

namespace m3 {
namespace {

using nlohmann::json;

bool Has(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && !j[key].is_null();
}

int64_t IntValue(const json& v, const std::string& where, const char* key) {
  Require(
      v.is_number_integer() || (v.is_number_float() && v.get<double>() == (int64_t)v.get<double>()),
      ErrorCode::kInvalidArgument, where + ": '" + key + "' must be an integer, got " + v.dump());
  return v.get<int64_t>();
}

int64_t Int(const json& j, const std::string& where, const char* key, int64_t fallback) {
  return Has(j, key) ? IntValue(j[key], where, key) : fallback;
}

}  // namespace

ModelConfigView ParseModelConfigView(const std::string& json_text, const std::string& source) {
  const json j = ParseJsonObject(json_text, source);
  Require(Has(j, "text_config") && j["text_config"].is_object(), ErrorCode::kInvalidArgument,
          source + ": missing 'text_config' (is this a MiniMax-M3 VL checkpoint?)");
  Require(Has(j, "vision_config") && j["vision_config"].is_object(), ErrorCode::kInvalidArgument,
          source + ": missing 'vision_config'");
  ModelConfigView c;
  c.model_type = j.value("model_type", std::string());

  const json& t = j["text_config"];
  const std::string tw = source + ": text_config";
  Require(Has(t, "vocab_size"), ErrorCode::kInvalidArgument,
          tw + ": missing required key 'vocab_size'");
  c.text.vocab_size = IntValue(t["vocab_size"], tw, "vocab_size");
  Require(c.text.vocab_size > 0, ErrorCode::kInvalidArgument,
          tw + ": 'vocab_size' must be positive, got " + std::to_string(c.text.vocab_size));
  c.text.max_position_embeddings = Int(t, tw, "max_position_embeddings", 0);
  c.text.bos_token_id = Int(t, tw, "bos_token_id", -1);
  if (Has(t, "eos_token_id")) {
    const json& e = t["eos_token_id"];
    if (e.is_array()) {
      for (const auto& x : e) c.text.eos_token_ids.push_back(IntValue(x, tw, "eos_token_id"));
    } else {
      c.text.eos_token_ids.push_back(IntValue(e, tw, "eos_token_id"));
    }
  }

  const json& v = j["vision_config"];
  const std::string vw = source + ": vision_config";
  static const json kEmpty = json::object();
  const json& compression =
      Has(v, "img_token_compression_config") && v["img_token_compression_config"].is_object()
          ? v["img_token_compression_config"]
          : kEmpty;
  const std::string cw = vw + ".img_token_compression_config";
  c.vision.patch_size = Int(v, vw, "patch_size", 14);
  c.vision.temporal_patch_size =
      Int(v, vw, "temporal_patch_size", Int(compression, cw, "temporal_patch_size", 2));
  c.vision.spatial_merge_size =
      Int(v, vw, "spatial_merge_size", Int(compression, cw, "spatial_merge_size", 2));

  c.image_token_id = Int(j, source, "image_token_index", Int(j, source, "image_token_id", -1));
  c.video_token_id = Int(j, source, "video_token_index", Int(j, source, "video_token_id", -1));
  return c;
}

ModelConfigView LoadModelConfigView(const std::string& model_dir) {
  const std::filesystem::path p = std::filesystem::path(model_dir) / "config.json";
  ModelConfigView c = ParseModelConfigView(ReadTextFile(p), p.string());
  c.generation = LoadGenerationConfig(model_dir);
  return c;
}

}  // namespace m3
