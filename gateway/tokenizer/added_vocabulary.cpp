// Added-token matching. The word and space tests follow the regexes `tokenizers` uses
// (\w and \s, Unicode-aware).
#include "gateway/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "gateway/tokenizer/normalizers.h"
#include "gateway/unicode/char_class.h"
#include "gateway/unicode/utf8.h"

namespace m3::tok {
namespace {

bool EndsWithWord(std::string_view s) {
  if (s.empty()) return false;
  size_t i = unicode::PrevCodePointStart(s, s.size());
  return unicode::IsWordChar(unicode::NextCodePoint(s, i));
}

bool StartsWithWord(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return unicode::IsWordChar(unicode::NextCodePoint(s, i));
}

// Start of the whitespace run that ends `s`.
size_t TrailingSpaceStart(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = unicode::PrevCodePointStart(s, end), probe = start;
    if (!unicode::IsWhitespace(unicode::NextCodePoint(s, probe))) break;
    end = start;
  }
  return end;
}

// Length of the whitespace run that starts `s`.
size_t LeadingSpaceLength(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!unicode::IsWhitespace(unicode::NextCodePoint(s, next))) break;
    i = next;
  }
  return i;
}

}  // namespace

void AddedVocabulary::Matcher::Add(std::string pattern, size_t token_index) {
  if (pattern.empty()) return;
  patterns_.push_back({std::move(pattern), token_index});
}

void AddedVocabulary::Matcher::Finish() {
  for (uint32_t i = 0; i < patterns_.size(); ++i) {
    by_first_byte_[static_cast<unsigned char>(patterns_[i].pattern[0])].push_back(i);
    starts_[static_cast<unsigned char>(patterns_[i].pattern[0])] = true;
  }
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](uint32_t a, uint32_t b) {
      return patterns_[a].pattern.size() > patterns_[b].pattern.size();
    });
  }
}

void AddedVocabulary::Matcher::Split(std::string_view text, const std::vector<AddedToken>& tokens,
                                     std::vector<TextSplit>& out) const {
  size_t done = 0;  // end of the last accepted token (start of pending plain text)
  size_t pos = 0;
  const size_t n = text.size();
  if (!patterns_.empty()) {
    while (pos < n) {
      while (pos < n && !starts_[static_cast<unsigned char>(text[pos])]) ++pos;
      if (pos >= n) break;
      const auto& bucket = by_first_byte_[static_cast<unsigned char>(text[pos])];
      const Entry* hit = nullptr;
      for (uint32_t idx : bucket) {
        const Entry& e = patterns_[idx];
        if (text.compare(pos, e.pattern.size(), e.pattern) == 0) {
          hit = &e;
          break;
        }
      }
      if (hit == nullptr) {
        ++pos;
        continue;
      }
      size_t start = pos, stop = pos + hit->pattern.size();
      pos = stop;  // matching resumes after this match even when it is discarded
      const AddedToken& tok = tokens[hit->token_index];
      if (tok.single_word) {
        const bool start_ok = start == 0 || !EndsWithWord(text.substr(0, start));
        const bool stop_ok = stop == n || !StartsWithWord(text.substr(stop));
        if (!start_ok || !stop_ok) continue;
      }
      if (tok.lstrip) start = std::max(TrailingSpaceStart(text.substr(0, start)), done);
      if (tok.rstrip) stop += LeadingSpaceLength(text.substr(stop));
      if (done < start) out.push_back({done, start, -1});
      out.push_back({start, stop, tok.id});
      done = stop;
    }
  }
  if (done != n) out.push_back({done, n, -1});
}

AddedVocabulary::AddedVocabulary(const Json& added_tokens, const Normalizer* normalizer) {
  if (added_tokens.is_null()) return;
  Require(added_tokens.is_array(), ErrorCode::kInvalidArgument,
          "tokenizer.json added_tokens is not a list");
  for (const auto& t : added_tokens) {
    Require(t.is_object(), ErrorCode::kInvalidArgument, "an added token is not an object");
    AddedToken tok;
    tok.content = Required<std::string>(t, "content", "added token");
    tok.id = Required<int32_t>(t, "id", "added token '" + tok.content + "'");
    Require(tok.id >= 0, ErrorCode::kInvalidArgument,
            "added token '" + tok.content + "' has a negative id");
    tok.special = Field<bool>(t, "special", false);
    tok.lstrip = Field<bool>(t, "lstrip", false);
    tok.rstrip = Field<bool>(t, "rstrip", false);
    tok.single_word = Field<bool>(t, "single_word", false);
    tok.normalized = Field<bool>(t, "normalized", !tok.special);
    if (tok.content.empty()) continue;
    Require(unicode::IsValidUtf8(tok.content), ErrorCode::kInvalidArgument,
            "added token is not UTF-8");
    tok.decode_form = tok.content;
    if (tok.normalized && normalizer) normalizer->Normalize(tok.decode_form);
    by_id_[tok.id] = tokens_.size();
    by_content_[tok.content] = tok.id;
    max_id_ = std::max(max_id_, tok.id);
    tokens_.push_back(std::move(tok));
  }
  // `tokenizers` lists special tokens before the others when building its matchers; the order
  // only decides between identical patterns.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < tokens_.size(); ++i) {
      const AddedToken& tok = tokens_[i];
      if (tok.special != (pass == 0)) continue;
      if (!tok.normalized) {
        raw_.Add(tok.content, i);
      } else {
        normalized_.Add(tokens_[i].decode_form, i);
      }
    }
  }
  raw_.Finish();
  normalized_.Finish();
}

const AddedToken* AddedVocabulary::ById(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

bool AddedVocabulary::IsSpecialContent(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return false;
  const AddedToken* tok = ById(it->second);
  return tok != nullptr && tok->special;
}

std::optional<int32_t> AddedVocabulary::IdOf(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

}  // namespace m3::tok
