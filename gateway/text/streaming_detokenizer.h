// StreamingDetokenizer: turns generated token ids, fed one at a time, into text deltas as soon
// as the text is final. It decodes a small window with Tokenizer::Decode (a prefix of already
// emitted tokens for context, plus the new ones) and emits the difference, so it is right for
// any decoder pipeline (ByteLevel, Metaspace, Strip, ...), and it holds back text that ends in
// an incomplete UTF-8 sequence (decoded as U+FFFD) until the following tokens complete it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/tokenizer/tokenizer.h"

namespace m3::text {

struct DetokenizerOptions {
  bool skip_special_tokens = true;
  // Special tokens kept in the text even with skip_special_tokens (e.g. <think>, tool-call
  // tags that the output parsers need to see).
  std::vector<int32_t> keep_special_ids;
};

class StreamingDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit StreamingDetokenizer(const tok::Tokenizer& tokenizer, DetokenizerOptions options = {});

  // Feeds one generated id; returns the newly final text (often "", never a partial character).
  // Throws m3::Error(kInvalidArgument) for an id outside the vocabulary.
  std::string Push(int32_t id);

  // End of generation: returns the held-back text; an incomplete trailing sequence comes out as
  // U+FFFD, as a one-shot Decode would produce it.
  std::string Flush();

 private:
  const tok::Tokenizer* tokenizer_;
  DetokenizerOptions options_;
  std::vector<int32_t> ids_;  // the window: ids_[prefix_..read_) emitted context, then pending
  size_t prefix_ = 0;
  size_t read_ = 0;
  std::string prefix_text_;  // Decode(ids_[prefix_, read_))
};

}  // namespace m3::text
