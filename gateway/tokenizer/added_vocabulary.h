// Added tokens of tokenizer.json (special or not): the tokens matched in the input before the
// model ever sees it, with the `tokenizers` matching rules (leftmost-longest, single_word,
// lstrip/rstrip, and tokens marked "normalized" matched on normalized text).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/tokenizer/json_util.h"

namespace m3::tok {

class Normalizer;

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = true;
  // What decoding emits for this token: `tokenizers` (0.22+) decodes a normalized token as its
  // normalized form, so the decoder can undo what the normalizer did.
  std::string decode_form;
};

// A cut of some text: [start, end) either plain text (id < 0) or an added token.
struct TextSplit {
  size_t start, end;
  int32_t id;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `normalizer` (may be null) rewrites the content of tokens marked normalized.
  AddedVocabulary(const Json& added_tokens, const Normalizer* normalizer);

  // Cuts raw input at the tokens that are not normalized.
  void SplitRaw(std::string_view text, std::vector<TextSplit>& out) const {
    raw_.Split(text, tokens_, out);
  }
  // Cuts normalized text at the tokens that are.
  void SplitNormalized(std::string_view text, std::vector<TextSplit>& out) const {
    normalized_.Split(text, tokens_, out);
  }

  const AddedToken* ById(int32_t id) const;
  std::optional<int32_t> IdOf(std::string_view content) const;
  // True when `content` is the text of a special token (`tokenizers` skips by content).
  bool IsSpecialContent(std::string_view content) const;
  int32_t MaxId() const { return max_id_; }

 private:
  // Leftmost-longest multi-pattern matcher: candidates bucketed by first byte, longest first.
  class Matcher {
   public:
    void Add(std::string pattern, size_t token_index);
    void Finish();
    bool empty() const { return patterns_.empty(); }
    void Split(std::string_view text, const std::vector<AddedToken>& tokens,
               std::vector<TextSplit>& out) const;

   private:
    struct Entry {
      std::string pattern;
      size_t token_index;
    };
    std::vector<Entry> patterns_;
    std::array<std::vector<uint32_t>, 256> by_first_byte_;
    std::array<bool, 256> starts_{};  // some pattern starts with this byte
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, int32_t> by_content_;
  Matcher raw_, normalized_;
  int32_t max_id_ = -1;
};

}  // namespace m3::tok
