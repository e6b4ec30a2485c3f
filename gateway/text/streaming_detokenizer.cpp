// Incremental detokenization by prefix/read offsets (see streaming_detokenizer.h).
#include "gateway/text/streaming_detokenizer.h"

#include <algorithm>
#include <span>

#include "shared/error.h"

namespace m3::text {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
// A UTF-8 character is at most 4 bytes, so a tail still undecided after this many tokens is
// invalid UTF-8 (or tokens that decode to nothing); emitting it then bounds the per-token work.
constexpr size_t kMaxPending = 16;

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const tok::Tokenizer& tokenizer,
                                           DetokenizerOptions options)
    : tokenizer_(&tokenizer), options_(std::move(options)) {}

std::string StreamingDetokenizer::Push(int32_t id) {
  Require(id >= 0 && static_cast<size_t>(id) < tokenizer_->VocabSize(), ErrorCode::kInvalidArgument,
          "token id " + std::to_string(id) + " is outside the vocabulary");
  // Skipping a special token before decoding is what Decode(..., skip_special_tokens) does; doing
  // it here keeps such tokens out of the window entirely.
  if (options_.skip_special_tokens && tokenizer_->IsSpecial(id) &&
      std::find(options_.keep_special_ids.begin(), options_.keep_special_ids.end(), id) ==
          options_.keep_special_ids.end()) {
    return {};
  }
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  std::string text = tokenizer_->Decode(all.subspan(prefix_), false);
  if (!text.starts_with(prefix_text_)) {
    // Only after a forced emission of invalid UTF-8 can later tokens rewrite the context's text;
    // what was sent cannot be taken back, so go on without that context.
    prefix_ = read_;
    prefix_text_.clear();
    text = tokenizer_->Decode(all.subspan(prefix_), false);
  }
  const bool grew = text.size() > prefix_text_.size();
  const bool complete = !std::string_view(text).ends_with(kReplacement);
  const bool overdue = ids_.size() - read_ >= kMaxPending;
  if (!overdue && (!grew || !complete)) return {};

  std::string delta = text.substr(prefix_text_.size());
  // The new read window becomes the context for the next tokens.
  prefix_ = read_;
  read_ = ids_.size();
  if (prefix_ > 0) {  // drop ids no window will look at again
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_));
    read_ -= prefix_;
    prefix_ = 0;
  }
  prefix_text_ =
      tokenizer_->Decode(std::span<const int32_t>(ids_).subspan(prefix_, read_ - prefix_), false);
  return delta;
}

std::string StreamingDetokenizer::Flush() {
  std::string delta;
  if (read_ < ids_.size()) {
    std::span<const int32_t> all(ids_);
    std::string text = tokenizer_->Decode(all.subspan(prefix_), false);
    delta = text.starts_with(prefix_text_) ? text.substr(prefix_text_.size())
                                           : tokenizer_->Decode(all.subspan(read_), false);
  }
  ids_.clear();
  prefix_ = read_ = 0;
  prefix_text_.clear();
  return delta;
}

}  // namespace m3::text
