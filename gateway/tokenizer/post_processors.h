// tokenizer.json "post_processor" components that add special tokens around one sequence when
// encoding with add_special_tokens: TemplateProcessing, ByteLevel (ids unchanged), Bert/Roberta
// ([CLS] A [SEP]), Sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gateway/tokenizer/json_util.h"

namespace m3::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Rewrites the ids of a single encoded sequence.
  virtual void Process(std::vector<int32_t>& ids) const = 0;
};

// null → nullptr. Throws m3::Error kUnsupported naming an unknown type.
std::unique_ptr<PostProcessor> MakePostProcessor(const Json& j);

}  // namespace m3::tok
