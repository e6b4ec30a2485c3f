// TokenizerConfig: what a model directory's tokenizer_config.json says about tokens (the
// chat template is read by gateway/template): the named special tokens (bos, eos, pad, unk,
// additional/extra special tokens) and the added tokens of `added_tokens_decoder`, in the
// forms transformers 4 and 5 save them. SpecialTokens is the same list resolved to ids
// against the loaded tokenizer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/tokenizer/tokenizer.h"

namespace m3::tok {

struct TokenizerConfig {
  std::string source;  // the file it came from ("" when the directory has none)
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::vector<std::string> additional_special_tokens;  // additional_ / extra_special_tokens
  // added_tokens_decoder as tokenizer.json "added_tokens" entries (id, content, special,
  // lstrip, rstrip, single_word, normalized), in id order.
  nlohmann::json added_tokens = nlohmann::json::array();
};

// Parses tokenizer_config.json text; `source` names the file in errors. Throws
// m3::Error(kInvalidArgument) for malformed JSON or a field of the wrong shape.
TokenizerConfig ParseTokenizerConfig(std::string_view json_text, const std::string& source);
// Reads <model_dir>/tokenizer_config.json; a directory without one gives an empty config.
TokenizerConfig LoadTokenizerConfig(const std::string& model_dir);

struct SpecialToken {
  std::string content;
  int32_t id = -1;
};

struct SpecialTokens {
  std::optional<SpecialToken> bos, eos, pad, unk;
  std::vector<SpecialToken> additional;

  // The variables apply_chat_template passes from the tokenizer's special_tokens_map:
  // bos_token, eos_token, pad_token, unk_token (those set) and additional_special_tokens.
  nlohmann::ordered_json TemplateVariables() const;
};

// Looks every named token up in `tokenizer`. Throws m3::Error(kInvalidArgument) naming the
// file and key for a token the vocabulary lacks (transformers would silently add one past the
// model's embedding table).
SpecialTokens ResolveSpecialTokens(const TokenizerConfig& config, const Tokenizer& tokenizer);

// tokenizer.json of `model_dir` with the added tokens of its tokenizer_config.json that
// tokenizer.json lacks. Throws m3::Error: kNotFound (no tokenizer.json), kInvalidArgument (an
// added token whose id or content conflicts with tokenizer.json; the message names both).
Tokenizer LoadModelTokenizer(const std::string& model_dir, const TokenizerConfig& config);

}  // namespace m3::tok
