// json.dumps (see json_dump.h): string escaping of json.encoder (py_encode_basestring and its
// ASCII variant), float repr with NaN/Infinity, key coercion and the indent layout.
#include "gateway/template/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gateway/template/py_text.h"
#include "gateway/template/render_budget.h"
#include "gateway/template/render_error.h"
#include "gateway/unicode/utf8.h"

namespace m3::tmpl {

namespace {

void AppendJsonString(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  auto hex4 = [&](unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "\\u%04x", v);
    out += buf;
  };
  auto emit = [&](char32_t c) {
    switch (c) {
      case '"':
        out += "\\\"";
        return;
      case '\\':
        out += "\\\\";
        return;
      case '\n':
        out += "\\n";
        return;
      case '\r':
        out += "\\r";
        return;
      case '\t':
        out += "\\t";
        return;
      case '\b':
        out += "\\b";
        return;
      case '\f':
        out += "\\f";
        return;
      default:
        break;
    }
    if (c < 0x20) {
      hex4(static_cast<unsigned>(c));
    } else if (ensure_ascii && c > 0x7E) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        hex4(0xD800 | static_cast<unsigned>(v >> 10));
        hex4(0xDC00 | static_cast<unsigned>(v & 0x3FF));
      } else {
        hex4(static_cast<unsigned>(c));
      }
    } else {
      unicode::AppendUtf8(out, c);
    }
  };
  // Runs of printable ASCII (nearly all of a tool schema or a prompt) are copied as they are;
  // the rest is decoded a run of non-ASCII bytes at a time (lossy decoding never joins bytes
  // across an ASCII byte, so this is the whole string's decoding), not the whole string into
  // code points first (4 bytes per character: 256 MB for a 64 MB tool description).
  const auto plain = [](unsigned char b) { return b >= 0x20 && b < 0x7F && b != '"' && b != '\\'; };
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && plain(static_cast<unsigned char>(s[j]))) ++j;
    out.append(s, i, j - i);
    if (j == s.size()) break;
    if (static_cast<unsigned char>(s[j]) < 0x80) {
      emit(static_cast<unsigned char>(s[j]));
      i = j + 1;
      continue;
    }
    size_t k = j;
    while (k < s.size() && static_cast<unsigned char>(s[k]) >= 0x80) ++k;
    for (char32_t c : unicode::DecodeLossy(std::string_view(s).substr(j, k - j))) emit(c);
    i = k;
  }
  out += '"';
}

std::string FloatJson(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py::FloatRepr(d);
}

std::string KeyString(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString:
      return k.AsString();
    case Value::Kind::kInt:
      return std::to_string(k.AsInt());
    case Value::Kind::kFloat:
      return FloatJson(k.AsDouble());
    case Value::Kind::kBool:
      return k.AsBool() ? "true" : "false";
    case Value::Kind::kNone:
      return "null";
    default:
      Fail("keys must be str, int, float, bool or None, not " + TypeName(k));
  }
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.item_separator.value_or(o.indent ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  void Dump(const Value& v, int level, std::string& out) {
    if (level > ActiveLimits().max_nesting) {
      FailLimit("tojson value nested deeper than " + std::to_string(ActiveLimits().max_nesting));
    }
    switch (v.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return;
      case Value::Kind::kBool:
        out += v.AsBool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out += std::to_string(v.AsInt());
        return;
      case Value::Kind::kFloat:
        out += FloatJson(v.AsDouble());
        return;
      case Value::Kind::kString:
        AppendJsonString(out, v.AsString(), o_.ensure_ascii);
        return;
      case Value::Kind::kList: {
        const auto& items = v.AsList().items;
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep_;
          Newline(level + 1, out);
          Dump(items[i], level + 1, out);
          CheckStringSize(out.size());  // shared items and indents can outgrow the value
        }
        Newline(level, out);
        out += ']';
        return;
      }
      case Value::Kind::kDict: {
        std::vector<std::pair<std::string, const Value*>> entries;
        for (const auto& [k, e] : v.AsDict().entries) entries.emplace_back(KeyString(k), &e);
        if (entries.empty()) {
          out += "{}";
          return;
        }
        if (o_.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep_;
          Newline(level + 1, out);
          AppendJsonString(out, entries[i].first, o_.ensure_ascii);
          out += key_sep_;
          Dump(*entries[i].second, level + 1, out);
          CheckStringSize(out.size());
        }
        Newline(level, out);
        out += '}';
        return;
      }
      default:
        Fail("Object of type " + TypeName(v) + " is not JSON serializable");
    }
  }

 private:
  void Newline(int level, std::string& out) const {
    if (!o_.indent) return;
    out += '\n';
    CheckStringSize(out.size() + static_cast<uint64_t>(level) * o_.indent->size());
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }

  const JsonDumpOptions& o_;
  std::string item_sep_;
  std::string key_sep_;
};

}  // namespace

std::string JsonDump(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  Dumper(options).Dump(v, 0, out);
  return out;
}

}  // namespace m3::tmpl
