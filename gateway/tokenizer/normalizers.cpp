// Normalizer implementations. Unicode normalization forms come from utf8proc; a fast path
// skips text whose code points are all below the first character any form can change.
#include "gateway/tokenizer/normalizers.h"

#include <utf8proc.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "gateway/tokenizer/pattern.h"
#include "gateway/unicode/char_class.h"
#include "gateway/unicode/utf8.h"

namespace m3::tok {
namespace {

// Code points (BMP only) before which a normalization form can cut text without changing the
// result: starters (combining class 0) that the form leaves as they are and that never appear
// after the first position of any decomposition, so no composition or reordering reaches
// across them. Derived from utf8proc's data once per form.
class InertTable {
 public:
  explicit InertTable(int options) : inert_(0x10000, false) {
    const bool compat = (options & UTF8PROC_COMPAT) != 0;
    const bool compose = (options & UTF8PROC_COMPOSE) != 0;
    const auto decompose_opts =
        static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0));
    std::vector<bool> second(0x10000, false), decomposes(0x10000, false);
    for (char32_t c = 0; c < 0x10000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      utf8proc_int32_t buf[32];
      int boundclass = 0;
      const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 32,
                                             decompose_opts, &boundclass);
      if (n < 1 || n > 32) {
        decomposes[c] = true;
        continue;
      }
      decomposes[c] = !(n == 1 && static_cast<char32_t>(buf[0]) == c);
      for (utf8proc_ssize_t k = 1; k < n; ++k) {
        if (buf[k] >= 0 && buf[k] < 0x10000) second[static_cast<size_t>(buf[k])] = true;
      }
    }
    for (char32_t c = 0; c < 0x10000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      if (second[c] ||
          utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class != 0) {
        continue;
      }
      bool stable = !decomposes[c];
      if (!stable && compose) {  // a composed character the composing form rebuilds as itself
        std::string one;
        unicode::AppendUtf8(one, c);
        utf8proc_uint8_t* out = nullptr;
        const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(one.data()),
                                    static_cast<utf8proc_ssize_t>(one.size()), &out,
                                    static_cast<utf8proc_option_t>(options));
        stable = n >= 0 && std::string_view(reinterpret_cast<const char*>(out),
                                            static_cast<size_t>(n)) == one;
        std::free(out);
      }
      inert_[c] = stable;
    }
  }
  bool Inert(char32_t c) const { return c < 0x10000 && inert_[c]; }

 private:
  std::vector<bool> inert_;
};

class UnicodeForm : public Normalizer {
 public:
  UnicodeForm(int options, char32_t first_changed)
      : options_(options), limit_(first_changed), table_(options) {}
  void Normalize(std::string& text) const override {
    // Only the stretches from the last inert character before something else to the next
    // inert character go through utf8proc; everything else is copied through untouched.
    std::string out;
    bool changed = false;
    size_t emitted = 0;   // text[0, emitted) is already represented in `out`
    size_t last_cut = 0;  // position of the latest inert character
    size_t seg_start = 0;
    bool plain = true;
    auto normalize_range = [&](size_t s, size_t e) {
      if (!changed) {
        out.reserve(text.size() + 16);
        changed = true;
      }
      out.append(text, emitted, s - emitted);
      MapInto(std::string_view(text).substr(s, e - s), out);
      emitted = e;
    };
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
      // Eight ASCII bytes at a time: each is inert, so only last_cut moves.
      if (plain) {
        uint64_t w;
        while (i + 8 <= n &&
               (std::memcpy(&w, text.data() + i, 8), (w & 0x8080808080808080ull) == 0)) {
          i += 8;
          last_cut = i - 1;
        }
        if (i >= n) break;
      }
      const size_t at = i;
      const auto b = static_cast<unsigned char>(text[i]);
      char32_t c;
      if (b < 0x80) {
        c = b;
        ++i;
      } else {
        c = unicode::NextCodePoint(text, i);
      }
      if (c < limit_ || table_.Inert(c)) {
        if (!plain) {
          normalize_range(seg_start, at);
          plain = true;
        }
        last_cut = at;
      } else if (plain) {
        seg_start = last_cut;
        plain = false;
      }
    }
    if (!plain) normalize_range(seg_start, n);
    if (changed) {
      out.append(text, emitted, n - emitted);
      text.swap(out);
    }
  }

 private:
  void MapInto(std::string_view segment, std::string& out) const {
    utf8proc_uint8_t* mapped = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(segment.data()),
                                static_cast<utf8proc_ssize_t>(segment.size()), &mapped,
                                static_cast<utf8proc_option_t>(options_));
    if (n < 0) {
      throw Error(ErrorCode::kInternal,
                  std::string("unicode normalization failed: ") + utf8proc_errmsg(n));
    }
    out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
    std::free(mapped);
  }

  int options_;
  char32_t limit_;
  InertTable table_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void Normalize(std::string& text) const override {
    for (const auto& p : parts_) p->Normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  explicit ReplaceNormalizer(const Json& j)
      : pattern_(Child(j, "pattern", "Replace normalizer")),
        content_(Required<std::string>(j, "content", "Replace normalizer")) {}
  void Normalize(std::string& text) const override { text = pattern_.ReplaceAll(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void Normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  void Normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      const char32_t c = unicode::NextCodePoint(text, i);
      unicode::AppendUtf8(
          out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
    text.swap(out);
  }
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!unicode::IsWhitespace(unicode::NextCodePoint(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = unicode::PrevCodePointStart(text, end), probe = start;
        if (!unicode::IsWhitespace(unicode::NextCodePoint(text, probe))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Removes combining marks (general category Mn), as the `tokenizers` StripAccents does.
class StripAccentsNormalizer : public Normalizer {
 public:
  void Normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      const size_t start = i;
      const char32_t c = unicode::NextCodePoint(text, i);
      if (utf8proc_category(static_cast<utf8proc_int32_t>(c)) != UTF8PROC_CATEGORY_MN) {
        out.append(text, start, i - start);
      }
    }
    text.swap(out);
  }
};

}  // namespace

std::unique_ptr<Normalizer> MakeNormalizer(const Json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = TypeOf(j);
  // Code points below U+0300 are unchanged by NFC/NFD except Latin-1 letters with accents under
  // the decomposing forms, so the fast-path limits differ by form.
  if (type == "NFC")
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE, 0x300);
  if (type == "NFD")
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, 0xC0);
  if (type == "NFKC") {
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
                                         0xA0);
  }
  if (type == "NFKD") {
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT,
                                         0xA0);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const auto& p : Child(j, "normalizers", "Sequence normalizer")) {
      if (auto n = MakeNormalizer(p)) parts.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (type == "Replace") return std::make_unique<ReplaceNormalizer>(j);
  if (type == "Prepend") {
    return std::make_unique<PrependNormalizer>(
        Required<std::string>(j, "prepend", "Prepend normalizer"));
  }
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(Field<bool>(j, "strip_left", true),
                                             Field<bool>(j, "strip_right", true));
  }
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  throw Error(ErrorCode::kUnsupported, "unsupported tokenizer normalizer type '" + type + "'");
}

}  // namespace m3::tok
