// The loaded tokenizer pipeline behind m3::tok::Tokenizer: added vocabulary, normalizer,
// pre-tokenizer chain, BPE model, post-processor and decoder, wired as `tokenizers` wires them.
#pragma once

#include <cstdint>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/tokenizer/added_vocabulary.h"
#include "gateway/tokenizer/bpe_model.h"
#include "gateway/tokenizer/decoders.h"
#include "gateway/tokenizer/normalizers.h"
#include "gateway/tokenizer/post_processors.h"
#include "gateway/tokenizer/pre_tokenizers.h"

namespace m3::tok {

class TokenizerImpl {
 public:
  explicit TokenizerImpl(const Json& root);

  // Stops (without the post-processor) once `out` holds more than max_ids ids.
  void Encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>& out,
              size_t max_ids = SIZE_MAX) const;
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  const std::string* IdToToken(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  size_t VocabSize() const { return vocab_size_; }

 private:
  // Normalizes, pre-tokenizes and runs the model over one stretch of plain text.
  void EncodePlain(std::string_view text, bool at_origin, std::vector<int32_t>& out,
                   size_t max_ids) const;

  std::unique_ptr<Normalizer> normalizer_;
  PreTokenizerChain pre_tokenizers_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  AddedVocabulary added_;
  size_t vocab_size_ = 0;
};

}  // namespace m3::tok
