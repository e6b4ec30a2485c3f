// tokenizer.json "normalizer" components: Unicode forms (NFC, NFKC, NFD, NFKD), Sequence,
// Replace, Prepend, Lowercase, Strip, StripAccents. Each rewrites a string in place.
#pragma once

#include <memory>
#include <string>

#include "gateway/tokenizer/json_util.h"

namespace m3::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(std::string& text) const = 0;
};

// Builds the normalizer a tokenizer.json "normalizer" object describes (null → nullptr).
// Throws m3::Error kUnsupported naming an unknown type.
std::unique_ptr<Normalizer> MakeNormalizer(const Json& j);

}  // namespace m3::tok
