// TokenizerVocab: token bytes, stop ids, the sorted order and the trie; and the reading of a
// HuggingFace tokenizer.json into token bytes (byte-level BPE's GPT-2 byte-to-unicode table
// inverted, or sentencepiece's "\u2581" and <0xXX> byte pieces).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "grammar/grammar.h"
#include "grammar/vocab_trie.h"

namespace m3::grammar {

TokenizerVocab::TokenizerVocab(std::vector<std::string> tokens, std::vector<int32_t> stop_ids,
                               std::vector<int32_t> special_ids)
    : tokens_(std::move(tokens)), stop_ids_(std::move(stop_ids)) {
  size_t n = tokens_.size();
  matchable_.assign(n, 1);
  is_stop_.assign(n, 0);
  for (int32_t id : special_ids) {
    Require(id >= 0 && static_cast<size_t>(id) < n, ErrorCode::kInvalidArgument,
            "special token id " + std::to_string(id) + " outside the vocabulary");
    matchable_[static_cast<size_t>(id)] = 0;
  }
  for (int32_t id : stop_ids_) {
    Require(id >= 0 && static_cast<size_t>(id) < n, ErrorCode::kInvalidArgument,
            "stop token id " + std::to_string(id) + " outside the vocabulary");
    matchable_[static_cast<size_t>(id)] = 0;
    is_stop_[static_cast<size_t>(id)] = 1;
  }
  for (size_t i = 0; i < n; ++i)
    if (tokens_[i].empty() || tokens_[i].size() > 65535) matchable_[i] = 0;
  for (size_t i = 0; i < n; ++i)
    if (matchable_[i]) sorted_ids_.push_back(static_cast<int32_t>(i));
  std::sort(sorted_ids_.begin(), sorted_ids_.end(), [&](int32_t x, int32_t y) {
    const std::string& a = tokens_[static_cast<size_t>(x)];
    const std::string& b = tokens_[static_cast<size_t>(y)];
    return a != b ? a < b : x < y;
  });
  shared_prefix_.assign(sorted_ids_.size(), 0);
  for (size_t k = 1; k < sorted_ids_.size(); ++k) {
    const std::string& a = tokens_[static_cast<size_t>(sorted_ids_[k - 1])];
    const std::string& b = tokens_[static_cast<size_t>(sorted_ids_[k])];
    size_t p = 0;
    while (p < a.size() && p < b.size() && a[p] == b[p]) ++p;
    shared_prefix_[k] = static_cast<uint16_t>(p);
  }
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* data, size_t len) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < len; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  for (size_t i = 0; i < n; ++i) {
    uint32_t len = static_cast<uint32_t>(tokens_[i].size());
    mix(&len, sizeof len);
    mix(tokens_[i].data(), tokens_[i].size());
    uint8_t flags = static_cast<uint8_t>(matchable_[i] | (is_stop_[i] << 1));
    mix(&flags, 1);
  }
  fingerprint_ = h;
  trie_ = std::make_shared<const VocabTrie>(VocabTrie::Build(*this));
}

VocabTrie VocabTrie::Build(const TokenizerVocab& vocab) {
  VocabTrie t;
  t.byte.push_back(0);
  t.depth.push_back(0);
  t.subtree_end.push_back(0);
  std::vector<int32_t> path = {0};                       // node per depth on the current path
  std::vector<std::pair<int32_t, int32_t>> node_tokens;  // (node, id)
  const auto& sorted = vocab.sorted_ids();
  const auto& shared = vocab.shared_prefix();
  auto close_to = [&](size_t depth) {
    while (path.size() > depth + 1) {
      t.subtree_end[static_cast<size_t>(path.back())] = static_cast<int32_t>(t.byte.size());
      path.pop_back();
    }
  };
  for (size_t k = 0; k < sorted.size(); ++k) {
    const std::string& bytes = vocab.bytes(sorted[k]);
    size_t p = k == 0 ? 0 : shared[k];
    close_to(p);
    for (size_t d = p; d < bytes.size(); ++d) {
      path.push_back(static_cast<int32_t>(t.byte.size()));
      t.byte.push_back(static_cast<uint8_t>(bytes[d]));
      t.depth.push_back(static_cast<uint16_t>(d + 1));
      t.max_depth = std::max(t.max_depth, d + 1);
      t.subtree_end.push_back(0);
    }
    node_tokens.push_back({path.back(), sorted[k]});
  }
  close_to(0);
  t.subtree_end[0] = static_cast<int32_t>(t.byte.size());
  std::stable_sort(node_tokens.begin(), node_tokens.end(),
                   [](auto& x, auto& y) { return x.first < y.first; });
  t.token_begin.assign(t.byte.size() + 1, 0);
  for (auto [node, id] : node_tokens) {
    t.token_begin[static_cast<size_t>(node) + 1]++;
    t.ids.push_back(id);
  }
  for (size_t i = 0; i < t.byte.size(); ++i) t.token_begin[i + 1] += t.token_begin[i];
  return t;
}

namespace {

// The GPT-2 table: printable bytes stand for themselves, the rest for U+0100 onwards in order.
std::vector<int> UnicodeToByteTable() {
  std::vector<int> table(512, -1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[static_cast<size_t>(printable ? b : next++)] = b;
  }
  return table;
}

bool DecodeUtf8(std::string_view s, size_t& i, uint32_t& c) {
  auto u = static_cast<unsigned char>(s[i]);
  int n = u < 0x80 ? 1 : (u >> 5) == 6 ? 2 : (u >> 4) == 14 ? 3 : (u >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + static_cast<size_t>(n) > s.size()) return false;
  c = n == 1 ? u : n == 2 ? (u & 0x1F) : n == 3 ? (u & 0x0F) : (u & 0x07);
  for (int k = 1; k < n; ++k)
    c = (c << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
  i += static_cast<size_t>(n);
  return true;
}

bool HasType(const nlohmann::json& node, std::string_view type) {
  if (!node.is_object()) return false;
  if (node.value("type", "") == type) return true;
  for (const char* key : {"decoders", "pretokenizers"})
    if (node.contains(key) && node[key].is_array())
      for (const auto& child : node[key])
        if (HasType(child, type)) return true;
  return false;
}

}  // namespace

std::shared_ptr<const TokenizerVocab> TokenizerVocab::FromHuggingFaceJson(
    std::string_view tokenizer_json, const HfOptions& options) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(tokenizer_json);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, std::string("tokenizer.json: ") + e.what());
  }
  Require(j.is_object() && j.contains("model") && j["model"].is_object(),
          ErrorCode::kInvalidArgument, "tokenizer.json: no \"model\" object");
  const auto& model = j["model"];
  std::vector<std::pair<std::string, int64_t>> pieces;
  if (model.contains("vocab") && model["vocab"].is_object()) {
    for (const auto& [piece, id] : model["vocab"].items()) {
      Require(id.is_number_integer(), ErrorCode::kInvalidArgument,
              "tokenizer.json: vocab id of '" + piece + "' is not an integer");
      pieces.push_back({piece, id.get<int64_t>()});
    }
  } else if (model.contains("vocab") && model["vocab"].is_array()) {  // Unigram
    int64_t id = 0;
    for (const auto& entry : model["vocab"]) {
      Require(entry.is_array() && !entry.empty() && entry[0].is_string(),
              ErrorCode::kInvalidArgument, "tokenizer.json: malformed unigram vocab entry");
      pieces.push_back({entry[0].get<std::string>(), id++});
    }
  } else {
    throw Error(ErrorCode::kInvalidArgument, "tokenizer.json: model has no vocab");
  }
  struct Added {
    std::string content;
    int64_t id;
  };
  std::vector<Added> added;
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const auto& t : j["added_tokens"])
      if (t.is_object() && t.contains("id") && t.contains("content"))
        added.push_back({t["content"].get<std::string>(), t["id"].get<int64_t>()});
  int64_t max_id = -1;
  for (auto& [p, id] : pieces) max_id = std::max(max_id, id);
  for (auto& a : added) max_id = std::max(max_id, a.id);
  Require(max_id < (int64_t{1} << 24), ErrorCode::kInvalidArgument,
          "tokenizer.json: token id over 16M");
  size_t size = std::max<size_t>(static_cast<size_t>(max_id + 1), options.vocab_size);
  bool byte_level = HasType(j.value("decoder", nlohmann::json()), "ByteLevel") ||
                    HasType(j.value("pre_tokenizer", nlohmann::json()), "ByteLevel");
  bool metaspace =
      !byte_level && (HasType(j.value("decoder", nlohmann::json()), "Metaspace") ||
                      HasType(j.value("pre_tokenizer", nlohmann::json()), "Metaspace") ||
                      model.value("byte_fallback", false));
  static const std::vector<int> table = UnicodeToByteTable();
  std::vector<std::string> tokens(size);
  for (auto& [piece, id] : pieces) {
    std::string out;
    if (byte_level) {
      size_t i = 0;
      uint32_t c;
      bool ok = true;
      while (i < piece.size() && (ok = DecodeUtf8(piece, i, c))) {
        int b = c < table.size() ? table[c] : -1;
        if (b < 0) {
          ok = false;
          break;
        }
        out.push_back(static_cast<char>(b));
      }
      if (!ok) out = piece;  // not a byte-level piece: its text is its bytes
    } else if (metaspace) {
      if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {
        out.push_back(static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
      } else {
        for (size_t i = 0; i < piece.size();) {
          if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
            out.push_back(' ');
            i += 3;
          } else {
            out.push_back(piece[i++]);
          }
        }
      }
    } else {
      out = piece;
    }
    tokens[static_cast<size_t>(id)] = std::move(out);
  }
  std::vector<int32_t> special;
  std::vector<int32_t> stops = options.stop_ids;
  for (auto& a : added) {
    tokens[static_cast<size_t>(a.id)] = a.content;
    bool matchable =
        std::find(options.matchable_added_tokens.begin(), options.matchable_added_tokens.end(),
                  a.content) != options.matchable_added_tokens.end();
    if (!matchable) special.push_back(static_cast<int32_t>(a.id));
    if (options.stop_ids.empty() &&
        std::find(options.stop_token_contents.begin(), options.stop_token_contents.end(),
                  a.content) != options.stop_token_contents.end())
      stops.push_back(static_cast<int32_t>(a.id));
  }
  return std::make_shared<const TokenizerVocab>(std::move(tokens), std::move(stops),
                                                std::move(special));
}

}  // namespace m3::grammar
