// BPE model: loading vocab/merges and the merge loop. Short words use a linear scan over the
// adjacent-pair ranks (cache friendly, no heap); long ones a priority queue, both picking the
// lowest rank and the leftmost pair on ties, which is the order `tokenizers` merges in.
#include "gateway/tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "gateway/tokenizer/byte_level.h"
#include "gateway/unicode/utf8.h"

namespace m3::tok {
namespace {

constexpr uint32_t kNoRank = UINT32_MAX;
constexpr size_t kScanLimit = 64;  // words up to this many symbols use the linear scan

// Splits a merges entry: "a b" (exactly one space) or ["a", "b"].
std::pair<std::string, std::string> MergeParts(const Json& m, size_t index) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
      throw Error(ErrorCode::kInvalidArgument,
                  "BPE merge #" + std::to_string(index) + " '" + s + "' is not 'a b'");
    }
    return {s.substr(0, sp), s.substr(sp + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  throw Error(ErrorCode::kInvalidArgument,
              "BPE merge #" + std::to_string(index) + " is neither 'a b' nor a pair");
}

}  // namespace

BpeModel::BpeModel(const Json& model) {
  const std::string type = TypeOf(model);
  if (!type.empty() && type != "BPE") {
    throw Error(ErrorCode::kUnsupported,
                "unsupported tokenizer model type '" + type + "' (only BPE is implemented)");
  }
  if (Field<double>(model, "dropout", 0.0) > 0.0) {
    throw Error(ErrorCode::kUnsupported, "BPE dropout is not supported (encoding would be random)");
  }
  const Json& vocab = Child(model, "vocab", "BPE model");
  Require(vocab.is_object(), ErrorCode::kInvalidArgument, "BPE vocab is not an object");
  int32_t max_id = -1;
  vocab_.reserve(vocab.size());
  for (const auto& [token, id_json] : vocab.items()) {
    Require(id_json.is_number_integer(), ErrorCode::kInvalidArgument,
            "BPE vocab id of '" + token + "' is not an integer");
    const auto id = id_json.get<int64_t>();
    Require(id >= 0 && id < (1 << 30), ErrorCode::kInvalidArgument,
            "BPE vocab id of '" + token + "' is out of range");
    vocab_[token] = static_cast<int32_t>(id);
    max_id = std::max(max_id, static_cast<int32_t>(id));
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  has_token_.assign(id_to_token_.size(), false);
  for (const auto& [token, id] : vocab_) {
    id_to_token_[id] = token;
    has_token_[id] = true;
    // A token's spelling is at least as long as the piece bytes it stands for (byte-level
    // characters take 1-2 bytes per byte, a metaspace 3 for a space; an unknown character, at
    // most 4 bytes, one unk).
    max_piece_bytes_per_id_ = std::max({max_piece_bytes_per_id_, token.size(), size_t{4}});
  }

  continuing_subword_prefix_ = Field<std::string>(model, "continuing_subword_prefix", "");
  end_of_word_suffix_ = Field<std::string>(model, "end_of_word_suffix", "");
  plain_symbols_ = continuing_subword_prefix_.empty() && end_of_word_suffix_.empty();
  fuse_unk_ = Field<bool>(model, "fuse_unk", false);
  if (fuse_unk_) max_piece_bytes_per_id_ = 0;  // one unk for any run of unknown characters
  byte_fallback_ = Field<bool>(model, "byte_fallback", false);
  ignore_merges_ = Field<bool>(model, "ignore_merges", false);
  if (auto unk = Field<std::string>(model, "unk_token", ""); !unk.empty()) {
    auto it = vocab_.find(unk);
    Require(it != vocab_.end(), ErrorCode::kInvalidArgument,
            "BPE unk_token '" + unk + "' is not in the vocabulary");
    unk_id_ = it->second;
  }

  static const Json kNoMerges = Json::array();
  const Json* merges_json = FindChild(model, "merges");
  const Json& merges = merges_json ? *merges_json : kNoMerges;
  Require(merges.is_array(), ErrorCode::kInvalidArgument, "BPE merges is not a list");
  merges_.Reserve(merges.size());
  const size_t prefix_len = continuing_subword_prefix_.size();
  for (size_t i = 0; i < merges.size(); ++i) {
    auto [a, b] = MergeParts(merges[i], i);
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    Require(ia != vocab_.end() && ib != vocab_.end(), ErrorCode::kInvalidArgument,
            "BPE merge '" + a + " " + b + "' uses a token missing from the vocabulary");
    const std::string merged = a + b.substr(std::min(prefix_len, b.size()));
    auto im = vocab_.find(merged);
    Require(im != vocab_.end(), ErrorCode::kInvalidArgument,
            "BPE merge '" + a + " " + b + "' makes '" + merged + "', missing from the vocabulary");
    merges_.Insert(PairKey(ia->second, ib->second), Merge{static_cast<uint32_t>(i), im->second});
  }

  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(ByteToUnicode(static_cast<uint8_t>(b)));
    byte_symbol_[b] = it == vocab_.end() ? -1 : it->second;
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto fb = vocab_.find(std::string_view(name));
    byte_fallback_id_[b] = fb == vocab_.end() ? -1 : fb->second;
  }
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_token_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::InitialSymbols(std::string_view piece, bool raw_bytes,
                              std::vector<int32_t>& ids) const {
  ids.clear();
  // A run of unknown characters waiting to become one (fuse_unk) or several unk symbols.
  bool pending_unk = false;
  auto flush_unk = [&] {
    if (pending_unk) ids.push_back(*unk_id_);
    pending_unk = false;
  };
  auto unknown = [&](std::string_view decorated) {
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : decorated) all = all && byte_fallback_id_[b] >= 0;
      if (all) {
        for (unsigned char b : decorated) ids.push_back(byte_fallback_id_[b]);
        return;
      }
    }
    if (!unk_id_) return;  // no unk token: the character is dropped, as in `tokenizers`
    if (pending_unk && !fuse_unk_) ids.push_back(*unk_id_);
    pending_unk = true;
  };

  if (raw_bytes && plain_symbols_) {
    for (unsigned char b : piece) {
      const int32_t id = byte_symbol_[b];
      if (id >= 0) {
        flush_unk();
        ids.push_back(id);
      } else {
        unknown(ByteToUnicode(b));
      }
    }
    flush_unk();
    return;
  }
  thread_local std::string mapped, decorated;
  std::string_view text = piece;
  if (raw_bytes) {
    mapped.clear();
    AppendByteLevel(piece, mapped);
    text = mapped;
  }
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    i += unicode::Utf8Length(static_cast<unsigned char>(text[i]));
    std::string_view ch = text.substr(start, i - start);
    std::string_view key = ch;
    if (!plain_symbols_) {
      decorated.clear();
      if (start > 0) decorated.append(continuing_subword_prefix_);
      decorated.append(ch);
      if (i >= text.size()) decorated.append(end_of_word_suffix_);
      key = decorated;
    }
    auto it = vocab_.find(key);
    if (it != vocab_.end()) {
      flush_unk();
      ids.push_back(it->second);
    } else {
      unknown(key);
    }
  }
  flush_unk();
}

void BpeModel::MergeSymbols(std::vector<int32_t>& ids) const {
  const size_t n = ids.size();
  if (n < 2) return;
  if (n > kScanLimit) {
    MergeWithHeap(ids);
    return;
  }
  Merge pair[kScanLimit];
  auto lookup = [&](size_t i) {
    const Merge* m = merges_.Find(PairKey(ids[i], ids[i + 1]));
    return m ? *m : Merge{kNoRank, -1};
  };
  size_t len = n;
  for (size_t i = 0; i + 1 < len; ++i) pair[i] = lookup(i);
  while (len > 1) {
    size_t best = 0;
    uint32_t best_rank = pair[0].rank;
    for (size_t i = 1; i + 1 < len; ++i) {
      if (pair[i].rank < best_rank) {
        best_rank = pair[i].rank;
        best = i;
      }
    }
    if (best_rank == kNoRank) break;
    ids[best] = pair[best].new_id;
    // Drop symbol best+1 and the pair entry it started.
    for (size_t i = best + 1; i + 1 < len; ++i) ids[i] = ids[i + 1];
    for (size_t i = best + 1; i + 2 < len; ++i) pair[i] = pair[i + 1];
    --len;
    if (best > 0) pair[best - 1] = lookup(best - 1);
    if (best + 1 < len) pair[best] = lookup(best);
  }
  ids.resize(len);
}

void BpeModel::MergeWithHeap(std::vector<int32_t>& ids) const {
  const int n = static_cast<int>(ids.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Entry {
    uint32_t rank;
    int pos;
    int32_t new_id;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  auto push = [&](int pos) {
    const int nx = next[pos];
    if (nx < 0) return;
    if (const Merge* m = merges_.Find(PairKey(ids[pos], ids[nx]))) {
      queue.push({m->rank, pos, m->new_id});
    }
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Entry top = queue.top();
    queue.pop();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const int right = next[top.pos];
    const Merge* m = merges_.Find(PairKey(ids[top.pos], ids[right]));
    if (m == nullptr || m->new_id != top.new_id) continue;  // stale entry
    ids[top.pos] = top.new_id;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    if (prev[top.pos] >= 0) push(prev[top.pos]);
    push(top.pos);
  }
  size_t out = 0;
  for (int i = 0; i >= 0 && i < n; i = next[i]) ids[out++] = ids[i];
  ids.resize(out);
}

void BpeModel::Tokenize(std::string_view piece, bool raw_bytes, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (raw_bytes && plain_symbols_ && piece.size() == 1 && !ignore_merges_) {
    const int32_t id = byte_symbol_[static_cast<unsigned char>(piece[0])];
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const uint64_t hash = WordCache::HashOf(piece);
  const bool cacheable = piece.size() <= WordCache::kMaxKeyBytes;
  if (cacheable && cache_.Lookup(piece, hash, out)) return;

  thread_local std::vector<int32_t> ids;
  if (ignore_merges_) {
    thread_local std::string mapped;
    std::string_view whole = piece;
    if (raw_bytes) {
      mapped.clear();
      AppendByteLevel(piece, mapped);
      whole = mapped;
    }
    if (auto it = vocab_.find(whole); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  InitialSymbols(piece, raw_bytes, ids);
  MergeSymbols(ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) cache_.Insert(piece, hash, ids);
}

}  // namespace m3::tok
