// The BPE model of tokenizer.json: vocabulary, ranked merges, unk/fuse_unk, byte_fallback,
// continuing_subword_prefix, end_of_word_suffix, ignore_merges. Turns one pre-token into ids
// by applying the lowest-ranked merge first (leftmost on ties), as `tokenizers` does.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/tokenizer/flat_map.h"
#include "gateway/tokenizer/json_util.h"
#include "gateway/tokenizer/word_cache.h"

namespace m3::tok {

class BpeModel {
 public:
  // Throws m3::Error kUnsupported for a model type other than BPE (naming it), kInvalidArgument
  // for malformed vocab/merges.
  explicit BpeModel(const Json& model);

  // Appends the ids of one pre-token. With raw_bytes the piece holds raw bytes that stand for
  // their byte-level characters (the ByteLevel pre-tokenizer deferred the mapping).
  void Tokenize(std::string_view piece, bool raw_bytes, std::vector<int32_t>& out) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  const std::string* IdToToken(int32_t id) const;  // nullptr when no token has this id
  size_t IdLimit() const { return id_to_token_.size(); }
  // The most bytes of a piece one id can stand for (0: no bound, fused unknowns): a piece of n
  // bytes takes at least n / MaxPieceBytesPerId() ids.
  size_t MaxPieceBytesPerId() const { return max_piece_bytes_per_id_; }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void InitialSymbols(std::string_view piece, bool raw_bytes, std::vector<int32_t>& ids) const;
  void MergeSymbols(std::vector<int32_t>& ids) const;
  void MergeWithHeap(std::vector<int32_t>& ids) const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_token_;
  FlatMap64<Merge> merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  // Id of the single-byte-level-character token per byte (-1: none), for raw-byte pieces when
  // no prefix/suffix decorates symbols.
  std::array<int32_t, 256> byte_symbol_{};
  std::array<int32_t, 256> byte_fallback_id_{};  // id of "<0xXX>" per byte (-1: none)
  bool plain_symbols_ = true;  // no continuing_subword_prefix / end_of_word_suffix
  size_t max_piece_bytes_per_id_ = 0;
  WordCache cache_;
};

}  // namespace m3::tok
