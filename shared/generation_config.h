// generation_config.json of a model directory: the end-of-sequence ids the model stops at and
// the default sampling values its authors ship (temperature, top_p, top_k, min_p,
// repetition_penalty). A request's own values override these; absent keys stay unset.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace m3 {

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;  // empty: fall back to config.json's
  int64_t bos_token_id = -1;
  int64_t pad_token_id = -1;
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_new_tokens;
};

// Parses generation_config.json text; `source` names the file in error messages.
GenerationConfig ParseGenerationConfig(const std::string& json_text, const std::string& source);
// Reads DIR/generation_config.json; a directory without one gives an empty GenerationConfig.
GenerationConfig LoadGenerationConfig(const std::string& model_dir);

}  // namespace m3
