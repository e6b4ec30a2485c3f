// tokenizer.json "decoder" components: ByteLevel, Replace, Fuse, Strip, Metaspace, ByteFallback,
// BPEDecoder, Sequence. A decoder rewrites the list of token strings; the results are joined.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gateway/tokenizer/json_util.h"

namespace m3::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>& tokens) const = 0;
};

// null → nullptr. Throws m3::Error kUnsupported naming an unknown type.
std::unique_ptr<Decoder> MakeDecoder(const Json& j);

}  // namespace m3::tok
