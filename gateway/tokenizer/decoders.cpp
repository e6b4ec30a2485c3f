// Decoder implementations, each reproducing its `tokenizers` counterpart's token rewriting.
#include "gateway/tokenizer/decoders.h"

#include <cstdlib>

#include "gateway/tokenizer/byte_level.h"
#include "gateway/tokenizer/pattern.h"
#include "gateway/unicode/utf8.h"

namespace m3::tok {
namespace {

// Maps each token's characters back to bytes (a token with any character outside the
// byte-level alphabet contributes its UTF-8 bytes unchanged) and repairs the joined bytes.
class ByteLevelDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      const size_t mark = bytes.size();
      bool all_mapped = true;
      for (size_t i = 0; i < t.size();) {
        const int b = UnicodeToByte(unicode::NextCodePoint(t, i));
        if (b < 0) {
          all_mapped = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!all_mapped) {
        bytes.resize(mark);
        bytes.append(t);
      }
    }
    tokens.assign(1, unicode::IsValidUtf8(bytes) ? bytes : unicode::RepairUtf8(bytes));
  }
};

class ReplaceDecoder : public Decoder {
 public:
  explicit ReplaceDecoder(const Json& j)
      : pattern_(Child(j, "pattern", "Replace decoder")),
        content_(Required<std::string>(j, "content", "Replace decoder")) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) t = pattern_.ReplaceAll(t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class FuseDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character per token.
class StripDecoder : public Decoder {
 public:
  explicit StripDecoder(const Json& j)
      : start_(Field<size_t>(j, "start", 0)), stop_(Field<size_t>(j, "stop", 0)) {
    const auto content = Required<std::string>(j, "content", "Strip decoder");
    size_t i = 0;
    Require(!content.empty() && unicode::IsValidUtf8(content), ErrorCode::kInvalidArgument,
            "Strip decoder content must be one character");
    content_ = unicode::NextCodePoint(content, i);
  }
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
      for (size_t i = 0; i < t.size();) {
        const size_t at = i;
        chars.emplace_back(at, unicode::NextCodePoint(t, i));
      }
      size_t cut_start = 0;
      while (cut_start < start_ && cut_start < chars.size() &&
             chars[cut_start].second == content_) {
        ++cut_start;
      }
      size_t cut_end = 0;
      while (cut_end < stop_ && cut_end < chars.size() &&
             chars[chars.size() - 1 - cut_end].second == content_) {
        ++cut_end;
      }
      if (cut_start + cut_end >= chars.size()) {
        t.clear();
        continue;
      }
      const size_t begin = cut_start < chars.size() ? chars[cut_start].first : t.size();
      const size_t end = cut_end == 0 ? t.size() : chars[chars.size() - cut_end].first;
      t = t.substr(begin, end - begin);
    }
  }

 private:
  char32_t content_ = 0;
  size_t start_, stop_;
};

class MetaspaceDecoder : public Decoder {
 public:
  explicit MetaspaceDecoder(const Json& j)
      : replacement_(Field<std::string>(j, "replacement", "\u2581")) {
    if (j.contains("prepend_scheme")) {
      strip_first_ = Field<std::string>(j, "prepend_scheme", "always") != "never";
    } else {
      strip_first_ = Field<bool>(j, "add_prefix_space", true);
    }
  }
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::string out;
      const std::string& t = tokens[k];
      for (size_t i = 0; i < t.size();) {
        if (t.compare(i, replacement_.size(), replacement_) == 0) {
          if (!(k == 0 && strip_first_)) out.push_back(' ');
          i += replacement_.size();
        } else {
          out.push_back(t[i++]);
        }
      }
      tokens[k] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_ = true;
};

// Turns runs of "<0xXX>" tokens back into the bytes they stand for.
class ByteFallbackDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (unicode::IsValidUtf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (auto& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.starts_with("<0x") && t[5] == '>') {
        char* end = nullptr;
        const std::string hex = t.substr(3, 2);
        const long v = std::strtol(hex.c_str(), &end, 16);
        if (end == hex.c_str() + 2) byte = static_cast<int>(v);
      }
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }
};

// Classic BPE end-of-word suffix: the suffix becomes a space, except on the last token.
class BpeDecoder : public Decoder {
 public:
  explicit BpeDecoder(const Json& j) : suffix_(Field<std::string>(j, "suffix", "</w>")) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      const std::string with = k + 1 == tokens.size() ? "" : " ";
      std::string out;
      const std::string& t = tokens[k];
      size_t prev = 0, pos;
      while (!suffix_.empty() && (pos = t.find(suffix_, prev)) != std::string::npos) {
        out.append(t, prev, pos - prev);
        out.append(with);
        prev = pos + suffix_.size();
      }
      out.append(t, prev);
      tokens[k] = std::move(out);
    }
  }

 private:
  std::string suffix_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->DecodeChain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> MakeDecoder(const Json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = TypeOf(j);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(j);
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") return std::make_unique<StripDecoder>(j);
  if (type == "Metaspace") return std::make_unique<MetaspaceDecoder>(j);
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "BPEDecoder") return std::make_unique<BpeDecoder>(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const auto& p : Child(j, "decoders", "Sequence decoder")) {
      if (auto d = MakeDecoder(p)) parts.push_back(std::move(d));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  throw Error(ErrorCode::kUnsupported, "unsupported tokenizer decoder type '" + type + "'");
}

}  // namespace m3::tok
