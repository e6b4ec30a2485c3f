// generation_config.json parsing with validation of every value a sampler would use.
#include "shared/generation_config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"

namespace m3 {
namespace {

using nlohmann::json;

int64_t TokenId(const json& v, const std::string& where) {
  Require(v.is_number_integer() && v.get<int64_t>() >= 0, ErrorCode::kInvalidArgument,
          where + " must be a non-negative integer token id, got " + v.dump());
  return v.get<int64_t>();
}

std::optional<double> Number(const json& j, const char* key, const std::string& source, double lo,
                             double hi) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  const json& v = j[key];
  Require(v.is_number(), ErrorCode::kInvalidArgument,
          source + ": '" + key + "' must be a number, got " + v.dump());
  const double x = v.get<double>();
  Require(std::isfinite(x) && x >= lo && x <= hi, ErrorCode::kInvalidArgument,
          source + ": '" + key + "' = " + v.dump() + " is outside [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "]");
  return x;
}

}  // namespace

GenerationConfig ParseGenerationConfig(const std::string& json_text, const std::string& source) {
  json j = ParseJsonObject(json_text, source);
  GenerationConfig g;
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const json& e = j["eos_token_id"];
    if (e.is_array()) {
      for (size_t i = 0; i < e.size(); ++i)
        g.eos_token_ids.push_back(
            TokenId(e[i], source + ": eos_token_id[" + std::to_string(i) + "]"));
    } else {
      g.eos_token_ids.push_back(TokenId(e, source + ": eos_token_id"));
    }
  }
  for (auto [key, field] :
       {std::pair{"bos_token_id", &g.bos_token_id}, std::pair{"pad_token_id", &g.pad_token_id}}) {
    if (j.contains(key) && !j[key].is_null()) *field = TokenId(j[key], source + ": " + key);
  }
  if (j.contains("do_sample") && !j["do_sample"].is_null()) {
    Require(j["do_sample"].is_boolean(), ErrorCode::kInvalidArgument,
            source + ": 'do_sample' must be true or false");
    g.do_sample = j["do_sample"].get<bool>();
  }
  g.temperature = Number(j, "temperature", source, 0.0, 1e4);
  g.top_p = Number(j, "top_p", source, 0.0, 1.0);
  g.min_p = Number(j, "min_p", source, 0.0, 1.0);
  g.repetition_penalty = Number(j, "repetition_penalty", source, 1e-6, 1e4);
  if (auto k = Number(j, "top_k", source, -1.0, 1e9)) g.top_k = static_cast<int64_t>(*k);
  if (auto n = Number(j, "max_new_tokens", source, 1.0, 1e9))
    g.max_new_tokens = static_cast<int64_t>(*n);
  return g;
}

GenerationConfig LoadGenerationConfig(const std::string& model_dir) {
  const std::filesystem::path p = std::filesystem::path(model_dir) / "generation_config.json";
  if (!std::filesystem::exists(p)) return {};
  return ParseGenerationConfig(ReadTextFile(p), p.string());
}

}  // namespace m3
