// m3::tok::Tokenizer: the public face of the gateway's byte-level BPE tokenizer, loaded from a
// Hugging Face tokenizer.json and producing the same ids as the `tokenizers` library. The
// pipeline pieces (normalizers, pre-tokenizers, BPE model, decoders, post-processors, added
// vocabulary) live in their own files; this header only exposes what callers need.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace m3::tok {

class TokenizerImpl;

// Immutable after loading; every const method is safe to call from many threads at once.
// Copies share the loaded state (cheap).
class Tokenizer {
 public:
  // Throws m3::Error: kNotFound (no such file), kInvalidArgument (malformed JSON or fields),
  // kUnsupported (a model type or pipeline component this implementation does not handle; the
  // message names it).
  static Tokenizer FromFile(const std::string& path);
  static Tokenizer FromJson(std::string_view json_text);
  // From tokenizer.json already parsed (e.g. with added tokens merged in from
  // tokenizer_config.json); `source` names it in errors.
  static Tokenizer FromParsed(const nlohmann::json& root, const std::string& source);

  // Text is UTF-8; invalid sequences are replaced with U+FFFD first (as Rust's
  // String::from_utf8_lossy does). add_special_tokens runs the post-processor (BOS/EOS...).
  // `max_ids`: the encoding stops soon after it passes this many ids, so a caller that only
  // needs to know "too many" (a prompt over the context) does not pay for the whole text; the
  // result then holds more than max_ids ids (a prefix of the full encoding, give or take the
  // last word) and nothing else about it is meaningful.
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = false,
                              size_t max_ids = SIZE_MAX) const;
  // Throws m3::Error kInvalidArgument for an id outside [0, VocabSize()).
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  std::string IdToToken(int32_t id) const;  // "" when the id has no token
  bool IsSpecial(int32_t id) const;         // an added token marked special
  size_t VocabSize() const;                 // one past the largest id (model + added tokens)

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const TokenizerImpl> impl_;
};

}  // namespace m3::tok
