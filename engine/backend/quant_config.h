// QuantConfig: what a checkpoint's quantization config (config.json `quantization_config`, or
// ModelOpt's hf_quant_config.json) says about its Linears, model-independent: which format
// (dense, MXFP8, NVFP4) the module of a checkpoint name should have. The loader uses it to
// cross-check the tensors it finds (a Linear is what its tensors say it is) and dummy weights
// use it to pick each module's format. Understood:
//  - MiniMax's `quant_method: mxfp8` (`weight_block_size [1, 32]`, `ignored_layers` (or
//    `ignore`) matched as substrings of the module name, written without `language_model.`);
//  - ModelOpt (`quant_method: modelopt`, or hf_quant_config.json with `producer.name:
//    modelopt`) with quant_algo NVFP4 (group_size 16), MXFP8 (group_size 32) or
//    MIXED_PRECISION (`quantized_layers`: module -> {quant_algo}); its exclusion list (`ignore`
//    in config.json, `exclude_modules` in hf_quant_config.json) matched as vLLM matches it:
//    the exact module name, then a substring (with or without `language_model.`), then
//    fnmatch wildcards (`X*` also covers X's children).
// Vision modules (the vision tower, its projectors) are never quantized. Anything else (another
// quant_method or quant_algo, a block size the formats do not have) is kInvalidArgument naming
// it, at load, before any tensor is read.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/linear_weight.h"

namespace m3::engine::backend {

struct QuantConfig {
  enum class Method { kNone, kMxfp8, kModelOpt };
  Method method = Method::kNone;
  std::string algo;    // ModelOpt: NVFP4, MXFP8 or MIXED_PRECISION
  std::string source;  // the file and key it came from, for messages
  // ignored_layers (mxfp8: substrings) or ignore / exclude_modules (ModelOpt: vLLM's rules).
  std::vector<std::string> excluded;
  std::map<std::string, WeightFormat> quantized_layers;  // MIXED_PRECISION

  bool quantized() const { return method != Method::kNone; }
  // The format of the Linear `module` (a checkpoint module name, e.g.
  // "language_model.model.layers.3.self_attn.q_proj", without ".weight").
  WeightFormat FormatOf(std::string_view module) const;
  // True when `module` is on the exclusion list (or is a vision module).
  bool Excluded(std::string_view module) const;
  // "MXFP8 (config.json quantization_config)", "none", ...
  std::string Describe() const;
};

// The config of a model directory: config.json's `quantization_config` when present, else
// hf_quant_config.json when present, else none.
QuantConfig LoadQuantConfig(const std::string& model_dir);

// Parses one config object: a config.json `quantization_config`, or a whole
// hf_quant_config.json (`source` names it in errors).
QuantConfig ParseQuantConfig(const nlohmann::json& j, const std::string& source);

// Python fnmatch.fnmatchcase: `*`, `?`, `[seq]`, `[!seq]`.
bool FnMatch(std::string_view name, std::string_view pattern);

}  // namespace m3::engine::backend
