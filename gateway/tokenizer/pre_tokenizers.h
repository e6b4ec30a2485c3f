// tokenizer.json "pre_tokenizer" components: Split (regex or literal, every delimiter
// behaviour, invert), ByteLevel, Digits, Metaspace, Whitespace, WhitespaceSplit, Punctuation,
// Sequence. A pre-tokenizer cuts each piece of text into smaller pieces for the model.
// Pieces stream depth-first through the chain, so a rewritten piece only has to live until
// the steps after it have consumed it and nothing is buffered per document.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/tokenizer/function_ref.h"
#include "gateway/tokenizer/json_util.h"

namespace m3::tok {

struct Piece {
  std::string_view text;
  bool at_origin = false;  // starts at offset 0 of the original input (Metaspace "first")
};

using PieceSink = FunctionRef<void(const Piece&)>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Emits the non-empty sub-pieces of `piece` in order.
  virtual void Apply(const Piece& piece, PieceSink emit) const = 0;
};

class PreTokenizerChain {
 public:
  // Runs every step over `piece`, handing the final pieces to `emit`.
  void Run(const Piece& piece, PieceSink emit) const { RunFrom(0, piece, emit); }
  // The last step is ByteLevel and left its pieces as raw bytes: the model maps bytes to the
  // byte-level alphabet itself, which saves building the mapped text.
  bool output_raw_bytes() const { return output_raw_bytes_; }

 private:
  friend PreTokenizerChain MakePreTokenizers(const Json& j);
  void RunFrom(size_t level, const Piece& piece, PieceSink emit) const;
  std::vector<std::unique_ptr<PreTokenizer>> steps_;  // nested Sequences flattened
  bool output_raw_bytes_ = false;
};

// Throws m3::Error kUnsupported naming an unknown type.
PreTokenizerChain MakePreTokenizers(const Json& j);

}  // namespace m3::tok
