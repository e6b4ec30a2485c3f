// Parsing of quantization configs and the per-module format rules (quant_config.h).
#include "engine/backend/quant_config.h"

#include <filesystem>

#include "shared/error.h"
#include "shared/json_file.h"

namespace m3::engine::backend {

namespace {

constexpr std::string_view kLanguageModel = "language_model.";

std::string_view StripLanguageModel(std::string_view s) {
  if (s.starts_with(kLanguageModel)) s.remove_prefix(kLanguageModel.size());
  return s;
}

[[noreturn]] void Invalid(const std::string& source, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, source + ": " + what);
}

std::vector<std::string> StringList(const nlohmann::json& j, const char* key,
                                    const std::string& source) {
  std::vector<std::string> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  if (!j[key].is_array()) Invalid(source, std::string("'") + key + "' must be a list of strings");
  for (const auto& v : j[key]) {
    if (!v.is_string()) Invalid(source, std::string("'") + key + "' must be a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

int64_t GroupSize(const nlohmann::json& j, int64_t dflt, const std::string& source) {
  if (!j.contains("group_size") || j["group_size"].is_null()) return dflt;
  if (!j["group_size"].is_number_integer()) Invalid(source, "'group_size' must be an integer");
  return j["group_size"].get<int64_t>();
}

// A ModelOpt algorithm name (NVFP4 / MXFP8) as a format; kInvalidArgument otherwise.
WeightFormat AlgoFormat(const std::string& algo, int64_t group, const std::string& source,
                        const std::string& where) {
  if (algo == "NVFP4") {
    if (group != 16)
      Invalid(source, where + "NVFP4 needs group_size 16, not " + std::to_string(group));
    return WeightFormat::kNvfp4;
  }
  if (algo == "MXFP8") {
    if (group != 32)
      Invalid(source, where + "MXFP8 needs group_size 32, not " + std::to_string(group));
    return WeightFormat::kMxfp8;
  }
  Invalid(source, where + "quant_algo '" + algo +
                      "' is not supported (supported: NVFP4, MXFP8, MIXED_PRECISION)");
}

bool IsVisionModule(std::string_view m) {
  for (std::string_view v : {"vision_tower", "vision_model", "multi_modal_projector",
                             "patch_merge_mlp", "vit_large_projector"})
    if (m.find(v) != std::string_view::npos) return true;
  return false;
}

bool MatchBracket(std::string_view pattern, size_t& p, char c) {
  // pattern[p] == '['; on a well-formed class, p moves past ']' and the match is returned;
  // an unterminated '[' is a literal (as in Python).
  size_t q = p + 1;
  bool negate = false;
  if (q < pattern.size() && pattern[q] == '!') negate = true, ++q;
  const size_t first = q;
  while (q < pattern.size() && (pattern[q] != ']' || q == first)) ++q;
  if (q >= pattern.size()) {
    ++p;
    return c == '[';
  }
  bool hit = false;
  for (size_t i = first; i < q; ++i) {
    if (i + 2 < q && pattern[i + 1] == '-') {
      hit |= c >= pattern[i] && c <= pattern[i + 2];
      i += 2;
    } else {
      hit |= c == pattern[i];
    }
  }
  p = q + 1;
  return hit != negate;
}

}  // namespace

bool FnMatch(std::string_view name, std::string_view pattern) {
  // Iterative glob with one backtrack point for the last '*'.
  size_t n = 0, p = 0, star = std::string_view::npos, star_n = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_n = n;
      continue;
    }
    if (p < pattern.size()) {
      size_t next = p;
      bool ok;
      if (pattern[p] == '?') {
        ok = true, next = p + 1;
      } else if (pattern[p] == '[') {
        ok = MatchBracket(pattern, next, name[n]);
      } else {
        ok = pattern[p] == name[n], next = p + 1;
      }
      if (ok) {
        p = next;
        ++n;
        continue;
      }
    }
    if (star == std::string_view::npos) return false;
    p = star + 1;
    n = ++star_n;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool QuantConfig::Excluded(std::string_view module) const {
  if (IsVisionModule(module)) return true;
  const std::string_view bare = StripLanguageModel(module);
  for (const std::string& e : excluded) {
    if (method == Method::kMxfp8) {
      // MiniMax's ignored_layers: substrings of the name (written without language_model.).
      if (module.find(e) != std::string_view::npos) return true;
      continue;
    }
    // ModelOpt, as vLLM: exact, then substring (also of the name without language_model.),
    // then fnmatch wildcards; "X*" covers X and X's children, which fnmatch's '*' does.
    if (e == module || e == bare) return true;
    if (module.find(e) != std::string_view::npos || bare.find(e) != std::string_view::npos)
      return true;
    if (FnMatch(module, e) || FnMatch(bare, e)) return true;
  }
  return false;
}

WeightFormat QuantConfig::FormatOf(std::string_view module) const {
  if (method == Method::kNone || Excluded(module)) return WeightFormat::kDense;
  if (method == Method::kMxfp8) return WeightFormat::kMxfp8;
  if (algo == "NVFP4") return WeightFormat::kNvfp4;
  if (algo == "MXFP8") return WeightFormat::kMxfp8;
  // MIXED_PRECISION: the module's own entry, else an ancestor's (a whole experts block); a
  // module not listed stays unquantized.
  const std::string_view bare = StripLanguageModel(module);
  for (const auto& [key, format] : quantized_layers)
    if (StripLanguageModel(key) == bare) return format;
  for (const auto& [key, format] : quantized_layers) {
    const std::string_view k = StripLanguageModel(key);
    if (bare.size() > k.size() && bare.starts_with(k) && bare[k.size()] == '.') return format;
  }
  return WeightFormat::kDense;
}

std::string QuantConfig::Describe() const {
  switch (method) {
    case Method::kNone:
      return "none (dense weights)";
    case Method::kMxfp8:
      return "mxfp8 (" + source + ")";
    case Method::kModelOpt:
      return "modelopt " + algo + " (" + source + ")";
  }
  return "?";
}

QuantConfig ParseQuantConfig(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) Invalid(source, "the quantization config must be an object");
  QuantConfig q;
  q.source = source;
  std::string method;
  if (j.contains("quant_method")) {
    if (!j["quant_method"].is_string()) Invalid(source, "'quant_method' must be a string");
    method = j["quant_method"].get<std::string>();
  } else if ((j.contains("producer") && j["producer"].is_object() &&
              j["producer"].value("name", "") == "modelopt") ||
             j.contains("quantization")) {
    method = "modelopt";
  } else {
    Invalid(source, "no 'quant_method' (supported: mxfp8, modelopt)");
  }
  std::string lower = method;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "mxfp8") {
    q.method = QuantConfig::Method::kMxfp8;
    if (j.contains("weight_block_size") && !j["weight_block_size"].is_null()) {
      const auto& b = j["weight_block_size"];
      if (!(b.is_array() && b.size() == 2 && b[0] == 1 && b[1] == 32))
        Invalid(source, "mxfp8 needs weight_block_size [1, 32], not " + b.dump());
    }
    // MiniMax writes ignored_layers; some mxfp8 configs name the list `ignore`.
    for (const char* key : {"ignored_layers", "ignore"})
      for (std::string& e : StringList(j, key, source)) q.excluded.push_back(std::move(e));
    return q;
  }
  if (!lower.starts_with("modelopt"))
    Invalid(source, "quant_method '" + method + "' is not supported (supported: mxfp8, modelopt)");
  q.method = QuantConfig::Method::kModelOpt;
  // hf_quant_config.json nests the settings under "quantization"; config.json's
  // quantization_config holds them flat, the exclusions under "ignore".
  const bool nested = j.contains("quantization") && j["quantization"].is_object();
  const nlohmann::json& s = nested ? j["quantization"] : j;
  if (!s.contains("quant_algo") || !s["quant_algo"].is_string())
    Invalid(source, "a modelopt config needs a string 'quant_algo'");
  q.algo = Upper(s["quant_algo"].get<std::string>());
  for (const char* key : {"exclude_modules", "ignore"})
    for (std::string& e : StringList(s, key, source)) q.excluded.push_back(std::move(e));
  if (q.algo == "MIXED_PRECISION") {
    if (!s.contains("quantized_layers") || !s["quantized_layers"].is_object())
      Invalid(source, "MIXED_PRECISION needs a 'quantized_layers' object");
    for (const auto& [module, entry] : s["quantized_layers"].items()) {
      const std::string where = "quantized_layers['" + module + "']: ";
      if (!entry.is_object() || !entry.contains("quant_algo") || !entry["quant_algo"].is_string())
        Invalid(source, where + "needs a string 'quant_algo'");
      const std::string algo = Upper(entry["quant_algo"].get<std::string>());
      const int64_t dflt = algo == "NVFP4" ? 16 : 32;
      q.quantized_layers[module] = AlgoFormat(algo, GroupSize(entry, dflt, source), source, where);
    }
    return q;
  }
  const int64_t dflt = q.algo == "NVFP4" ? 16 : 32;
  AlgoFormat(q.algo, GroupSize(s, dflt, source), source, "");
  return q;
}

QuantConfig LoadQuantConfig(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  const fs::path config = dir / "config.json";
  if (fs::exists(config)) {
    const nlohmann::json j = ParseJsonObject(ReadTextFile(config), config.string());
    if (j.contains("quantization_config") && !j["quantization_config"].is_null())
      return ParseQuantConfig(j["quantization_config"], config.string() + " quantization_config");
  }
  const fs::path hf = dir / "hf_quant_config.json";
  if (fs::exists(hf))
    return ParseQuantConfig(ParseJsonObject(ReadTextFile(hf), hf.string()), hf.string());
  return {};
}

}  // namespace m3::engine::backend
