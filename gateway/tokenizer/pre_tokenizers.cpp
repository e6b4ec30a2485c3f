// Pre-tokenizer implementations, following the splitting rules of the `tokenizers` library
// (pieces that end up empty are dropped after every step).
#include "gateway/tokenizer/pre_tokenizers.h"

#include <algorithm>
#include <utility>

#include "gateway/tokenizer/byte_level.h"
#include "gateway/tokenizer/pattern.h"
#include "gateway/tokenizer/split_scanners.h"
#include "gateway/unicode/char_class.h"
#include "gateway/unicode/utf8.h"

namespace m3::tok {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior ParseBehavior(const std::string& s) {
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  throw Error(ErrorCode::kUnsupported, "unsupported split behavior '" + s + "'");
}

using Ranges = std::vector<std::pair<size_t, size_t>>;

struct Span {
  size_t start, end;
  bool flag;  // is a match (before the behaviour) / is to be removed (after)
};

// Cuts `piece` at the given sorted, non-overlapping matches according to `behavior`, appending
// the non-empty results to `out`.
void SplitPiece(const Piece& piece, const Ranges& matches, Behavior behavior, bool invert,
                PieceSink sink) {
  const std::string_view text = piece.text;
  auto emit = [&](size_t s, size_t e) {
    if (e > s) sink(Piece{text.substr(s, e - s), piece.at_origin && s == 0});
  };
  if (behavior == Behavior::kIsolated) {  // the hot path: every gap and match on its own
    size_t prev = 0;
    for (const auto& [s, e] : matches) {
      emit(prev, s);
      emit(s, e);
      prev = e;
    }
    emit(prev, text.size());
    return;
  }
  std::vector<Span> spans;
  spans.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (const auto& [s, e] : matches) {
    if (prev != s) spans.push_back({prev, s, false});
    spans.push_back({s, e, true});
    prev = e;
  }
  if (prev != text.size() || spans.empty()) spans.push_back({prev, text.size(), false});
  if (invert) {
    for (auto& sp : spans) sp.flag = !sp.flag;
  }
  std::vector<Span> result;
  result.reserve(spans.size());
  switch (behavior) {
    case Behavior::kRemoved:
      result = spans;
      break;
    case Behavior::kIsolated:
      break;
    case Behavior::kContiguous: {
      bool previous = false;
      for (const auto& sp : spans) {
        if (sp.flag == previous && !result.empty()) {
          result.back().end = sp.end;
        } else {
          result.push_back({sp.start, sp.end, false});
        }
        previous = sp.flag;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool previous = false;
      for (const auto& sp : spans) {
        if (sp.flag && !previous && !result.empty()) {
          result.back().end = sp.end;
        } else {
          result.push_back({sp.start, sp.end, false});
        }
        previous = sp.flag;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->flag && !previous && !result.empty()) {
          result.back().start = it->start;
        } else {
          result.push_back({it->start, it->end, false});
        }
        previous = it->flag;
      }
      std::reverse(result.begin(), result.end());
      break;
    }
  }
  for (const auto& sp : result) {
    if (!sp.flag) emit(sp.start, sp.end);
  }
}

// Matches every code point satisfying `pred` (each one its own match).
template <typename Pred>
void FindChars(std::string_view text, Pred&& pred, Ranges& out) {
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    if (pred(unicode::NextCodePoint(text, i))) out.emplace_back(start, i);
  }
}

// Emits the gaps and matches of an Isolated split as they are found (no match list).
class IsolatedEmitter {
 public:
  IsolatedEmitter(const Piece& piece, PieceSink sink) : piece_(piece), sink_(sink) {}
  void Match(size_t s, size_t e) {
    Emit(prev_, s);
    Emit(s, e);
    prev_ = e;
  }
  void Finish() { Emit(prev_, piece_.text.size()); }

 private:
  void Emit(size_t s, size_t e) {
    if (e > s) sink_(Piece{piece_.text.substr(s, e - s), piece_.at_origin && s == 0});
  }
  const Piece& piece_;
  PieceSink sink_;
  size_t prev_ = 0;
};

class SplitPreTokenizer : public PreTokenizer {
 public:
  explicit SplitPreTokenizer(const Json& j)
      : pattern_(Child(j, "pattern", "Split pre-tokenizer")),
        behavior_(ParseBehavior(Required<std::string>(j, "behavior", "Split pre-tokenizer"))),
        invert_(Field<bool>(j, "invert", false)) {
    const Json& p = Child(j, "pattern", "Split pre-tokenizer");
    if (auto r = p.find("Regex"); r != p.end() && r->is_string()) {
      scanner_ = SplitScanner::ForPattern(r->get<std::string>());
    }
  }
  void Apply(const Piece& piece, PieceSink emit) const override {
    if (behavior_ == Behavior::kIsolated) {  // the hot path: invert changes nothing here
      IsolatedEmitter out(piece, emit);
      auto on_match = [&](size_t s, size_t e) { out.Match(s, e); };
      if (scanner_) {
        scanner_->ForEachMatch(piece.text, on_match);
      } else {
        pattern_.ForEachMatch(piece.text, on_match);
      }
      out.Finish();
      return;
    }
    Ranges m;
    pattern_.FindAll(piece.text, m);
    SplitPiece(piece, m, behavior_, invert_, emit);
  }

 private:
  Pattern pattern_;
  std::unique_ptr<SplitScanner> scanner_;  // a known pattern, matched without PCRE2
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(const Json& j, bool map_bytes)
      : add_prefix_space_(Field<bool>(j, "add_prefix_space", true)),
        map_bytes_(map_bytes),
        scanner_(Field<bool>(j, "use_regex", true)
                     ? std::make_unique<SplitScanner>(SplitScanner::Kind::kGpt2)
                     : nullptr) {}
  bool IsNoOp() const { return !add_prefix_space_ && !scanner_ && !map_bytes_; }
  void Apply(const Piece& piece, PieceSink emit) const override {
    std::string prefixed;
    Piece q = piece;
    if (add_prefix_space_ && !q.text.starts_with(' ')) {
      prefixed.reserve(q.text.size() + 1);
      prefixed.push_back(' ');
      prefixed.append(q.text);
      q.text = prefixed;
    }
    auto out = [&](const Piece& p) {
      if (!map_bytes_) {
        emit(p);
        return;
      }
      std::string mapped;
      AppendByteLevel(p.text, mapped);
      emit(Piece{mapped, p.at_origin});
    };
    if (!scanner_) {
      if (!q.text.empty()) out(q);
      return;
    }
    IsolatedEmitter iso(q, out);
    scanner_->ForEachMatch(q.text, [&](size_t s, size_t e) { iso.Match(s, e); });
    iso.Finish();
  }

 private:
  bool add_prefix_space_;
  bool map_bytes_;
  std::unique_ptr<SplitScanner> scanner_;  // the GPT-2 pattern
};

class DigitsPreTokenizer : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(const Json& j)
      : individual_(Field<bool>(j, "individual_digits", false)) {}
  void Apply(const Piece& piece, PieceSink emit) const override {
    Ranges m;
    FindChars(piece.text, unicode::IsNumeric, m);
    SplitPiece(piece, m, individual_ ? Behavior::kIsolated : Behavior::kContiguous, false, emit);
  }

 private:
  bool individual_;
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  explicit MetaspacePreTokenizer(const Json& j)
      : replacement_(Field<std::string>(j, "replacement", "\u2581")),
        split_(Field<bool>(j, "split", true)) {
    size_t i = 0;
    Require(!replacement_.empty() && unicode::IsValidUtf8(replacement_),
            ErrorCode::kInvalidArgument, "Metaspace replacement must be one character");
    replacement_char_ = unicode::NextCodePoint(replacement_, i);
    Require(i == replacement_.size(), ErrorCode::kInvalidArgument,
            "Metaspace replacement must be one character");
    if (j.contains("prepend_scheme")) {
      const auto s = Field<std::string>(j, "prepend_scheme", "always");
      if (s == "always") {
        prepend_ = Prepend::kAlways;
      } else if (s == "first") {
        prepend_ = Prepend::kFirst;
      } else if (s == "never") {
        prepend_ = Prepend::kNever;
      } else {
        throw Error(ErrorCode::kUnsupported, "unsupported Metaspace prepend_scheme '" + s + "'");
      }
    } else {
      prepend_ = Field<bool>(j, "add_prefix_space", true) ? Prepend::kAlways : Prepend::kNever;
    }
  }
  void Apply(const Piece& piece, PieceSink emit) const override {
    std::string text;
    text.reserve(piece.text.size() + replacement_.size());
    for (char c : piece.text) {
      if (c == ' ') {
        text.append(replacement_);
      } else {
        text.push_back(c);
      }
    }
    const bool prepend =
        prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && piece.at_origin);
    if (prepend && !text.starts_with(replacement_)) text.insert(0, replacement_);
    const Piece q{text, piece.at_origin};
    if (!split_) {
      if (!q.text.empty()) emit(q);
      return;
    }
    Ranges m;
    FindChars(
        q.text, [&](char32_t c) { return c == replacement_char_; }, m);
    SplitPiece(q, m, Behavior::kMergedWithNext, false, emit);
  }

 private:
  std::string replacement_;
  char32_t replacement_char_ = 0;
  bool split_;
  Prepend prepend_ = Prepend::kAlways;
};

class WhitespacePreTokenizer : public PreTokenizer {
 public:
  WhitespacePreTokenizer() : regex_(R"(\w+|[^\w\s]+)") {}
  void Apply(const Piece& piece, PieceSink emit) const override {
    regex_.ForEachMatch(piece.text, [&](size_t s, size_t e) {
      if (e > s) emit(Piece{piece.text.substr(s, e - s), piece.at_origin && s == 0});
    });
  }

 private:
  Regex regex_;
};

class WhitespaceSplitPreTokenizer : public PreTokenizer {
 public:
  void Apply(const Piece& piece, PieceSink emit) const override {
    Ranges m;
    FindChars(piece.text, unicode::IsWhitespace, m);
    SplitPiece(piece, m, Behavior::kRemoved, false, emit);
  }
};

class PunctuationPreTokenizer : public PreTokenizer {
 public:
  explicit PunctuationPreTokenizer(const Json& j)
      : behavior_(ParseBehavior(Field<std::string>(j, "behavior", "Isolated"))) {}
  void Apply(const Piece& piece, PieceSink emit) const override {
    Ranges m;
    FindChars(
        piece.text,
        [](char32_t c) {
          const bool ascii_punct = c < 0x80 && ((c >= '!' && c <= '/') || (c >= ':' && c <= '@') ||
                                                (c >= '[' && c <= '`') || (c >= '{' && c <= '~'));
          return ascii_punct || unicode::IsPunctuation(c);
        },
        m);
    SplitPiece(piece, m, behavior_, false, emit);
  }

 private:
  Behavior behavior_;
};

void Flatten(const Json& j, std::vector<const Json*>& out) {
  if (TypeOf(j) == "Sequence") {
    auto it = j.find("pretokenizers");
    Require(it != j.end() && it->is_array(), ErrorCode::kInvalidArgument,
            "Sequence pre-tokenizer needs a 'pretokenizers' list");
    for (const auto& p : *it) Flatten(p, out);
  } else {
    out.push_back(&j);
  }
}

}  // namespace

void PreTokenizerChain::RunFrom(size_t level, const Piece& piece, PieceSink emit) const {
  if (level == steps_.size()) {
    emit(piece);
    return;
  }
  steps_[level]->Apply(piece, [&](const Piece& sub) { RunFrom(level + 1, sub, emit); });
}

PreTokenizerChain MakePreTokenizers(const Json& j) {
  PreTokenizerChain chain;
  if (j.is_null()) return chain;
  std::vector<const Json*> flat;
  Flatten(j, flat);
  for (size_t i = 0; i < flat.size(); ++i) {
    const Json& p = *flat[i];
    const std::string type = TypeOf(p);
    const bool last = i + 1 == flat.size();
    if (type == "Split") {
      chain.steps_.push_back(std::make_unique<SplitPreTokenizer>(p));
    } else if (type == "ByteLevel") {
      auto step = std::make_unique<ByteLevelPreTokenizer>(p, !last);
      chain.output_raw_bytes_ = last;
      // Last, without prefix space or regex, it only maps bytes, which the model then does.
      if (!step->IsNoOp()) chain.steps_.push_back(std::move(step));
    } else if (type == "Digits") {
      chain.steps_.push_back(std::make_unique<DigitsPreTokenizer>(p));
    } else if (type == "Metaspace") {
      chain.steps_.push_back(std::make_unique<MetaspacePreTokenizer>(p));
    } else if (type == "Whitespace") {
      chain.steps_.push_back(std::make_unique<WhitespacePreTokenizer>());
    } else if (type == "WhitespaceSplit") {
      chain.steps_.push_back(std::make_unique<WhitespaceSplitPreTokenizer>());
    } else if (type == "Punctuation") {
      chain.steps_.push_back(std::make_unique<PunctuationPreTokenizer>(p));
    } else {
      throw Error(ErrorCode::kUnsupported,
                  "unsupported tokenizer pre-tokenizer type '" + type + "'");
    }
  }
  return chain;
}

}  // namespace m3::tok
