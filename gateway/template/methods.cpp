// Python methods of str, dict and list reachable from templates (see methods.h).
#include "gateway/template/methods.h"

#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "gateway/template/call_args.h"
#include "gateway/template/py_text.h"
#include "gateway/template/render_budget.h"
#include "gateway/template/render_error.h"
#include "gateway/unicode/char_class.h"
#include "gateway/unicode/utf8.h"

namespace m3::tmpl {

namespace {

std::optional<std::string> OptStr(const Value& v, const char* what) {
  if (v.IsUndefined() || v.IsNone()) return std::nullopt;
  if (!v.IsString()) Fail(std::string(what) + " arg must be None or str");
  return v.AsString();
}

const std::string& StrArg(const Value& v, const char* method) {
  if (!v.IsString()) {
    Fail(std::string(method) + "() argument must be str, not " + TypeName(v));
  }
  return v.AsString();
}

Value StrList(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::List(std::move(out));
}

// Byte offset of code point index `cp` (clamped like Python slice bounds).
size_t ByteOffset(const std::string& s, int64_t cp) {
  int64_t n = py::Length(s);
  if (cp < 0) cp = std::max<int64_t>(0, cp + n);
  if (cp >= n) return s.size();
  size_t i = 0;
  for (int64_t k = 0; k < cp; ++k) i = unicode::NextCodePointEnd(s, i);
  return i;
}

int64_t CodePointIndex(const std::string& s, size_t byte) {
  return py::Length(std::string_view(s).substr(0, byte));
}

bool AffixMatch(const std::string& s, const Value& affix, const Value& start, bool prefix,
                const char* method) {
  std::string_view view(s);
  if (!start.IsUndefined() && !start.IsNone())
    view = view.substr(ByteOffset(s, IntArg(start, 0, "start")));
  auto one = [&](const Value& a) {
    const std::string& p = StrArg(a, method);
    if (p.size() > view.size()) return false;
    return prefix ? view.substr(0, p.size()) == p : view.substr(view.size() - p.size()) == p;
  };
  if (affix.IsList() && affix.AsList().is_tuple) {
    for (const Value& a : affix.AsList().items) {
      if (one(a)) return true;
    }
    return false;
  }
  if (!affix.IsString()) {
    Fail(std::string(method) + " first arg must be str or a tuple of str, not " + TypeName(affix));
  }
  return one(affix);
}

template <typename Pred>
bool AllChars(const std::string& s, Pred p) {
  if (s.empty()) return false;
  for (char32_t c : unicode::DecodeLossy(s)) {
    if (!p(c)) return false;
  }
  return true;
}

std::string Pad(const std::string& s, int64_t width, const std::string& fill, int where) {
  int64_t len = py::Length(s);
  if (width <= len) return s;
  int64_t marg = width - len;
  uint64_t pad_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(marg), fill.size(), &pad_bytes)) {
    pad_bytes = UINT64_MAX;
  }
  CheckStringSize(pad_bytes > UINT64_MAX - s.size() ? UINT64_MAX : pad_bytes + s.size());
  int64_t left = where < 0 ? 0 : (where > 0 ? marg : marg / 2 + (marg & width & 1));
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = left; i < marg; ++i) out += fill;
  return out;
}

// str.format with {} / {0} / {name} fields and {{ }} escapes (no format specs).
std::string PyFormat(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      size_t e = fmt.find('}', i);
      if (e == std::string::npos) Fail("Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, e - i - 1);
      if (field.find_first_of(":!.[") != std::string::npos)
        Fail("format specs in str.format are not supported");
      const Value* v = nullptr;
      if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
        size_t idx = auto_index;
        if (field.empty()) {
          ++auto_index;
        } else if (std::from_chars(field.data(), field.data() + field.size(), idx).ec !=
                   std::errc{}) {
          idx = SIZE_MAX;  // too long a number: out of range like any other
        }
        if (idx >= args.positional.size())
          Fail("Replacement index " + (idx == SIZE_MAX ? field : std::to_string(idx)) +
               " out of range for positional args tuple");
        v = &args.positional[idx];
      } else {
        for (const auto& [k, kv] : args.keyword) {
          if (k == field) v = &kv;
        }
        if (!v) Fail("KeyError: '" + field + "'");
      }
      out += ToStr(*v);
      CheckStringSize(out.size());  // "{0}{0}{0}..." repeats one argument
      i = e;
    } else if (c == '}') {
      Fail("Single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  return out;
}

Value CallStrMethod(const std::string& s, const std::string& name, CallArgs& args) {
  ChargeSteps(static_cast<int64_t>(s.size() / 64));  // every method walks the string once
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto a = BindArgs(args, name, {"chars"});
    return Value(py::Strip(s, OptStr(a[0], name.c_str()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto a = BindArgs(args, name, {"sep", "maxsplit"});
    auto sep = OptStr(a[0], "sep");
    if (sep && sep->empty()) Fail("empty separator");
    int64_t maxsplit = IntArg(a[1], -1, "maxsplit");
    return StrList(name == "split" ? py::Split(s, sep, maxsplit) : py::RSplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    auto a = BindArgs(args, name, {"keepends"});
    return StrList(py::SplitLines(s, BoolArg(a[0], false)));
  }
  if (name == "startswith" || name == "endswith") {
    auto a = BindArgs(args, name, {"prefix", "start"});
    return Value(AffixMatch(s, a[0], a[1], name == "startswith", name.c_str()));
  }
  if (name == "upper") return BindArgs(args, name, {}), Value(py::Upper(s));
  if (name == "lower") return BindArgs(args, name, {}), Value(py::Lower(s));
  if (name == "title") return BindArgs(args, name, {}), Value(py::Title(s));
  if (name == "capitalize") return BindArgs(args, name, {}), Value(py::Capitalize(s));
  if (name == "replace") {
    auto a = BindArgs(args, name, {"old", "new", "count"});
    return Value(py::Replace(s, StrArg(a[0], "replace"), StrArg(a[1], "replace"),
                             IntArg(a[2], -1, "count")));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    auto a = BindArgs(args, name, {"sub", "start"});
    const std::string& sub = StrArg(a[0], name.c_str());
    size_t from = ByteOffset(s, IntArg(a[1], 0, "start"));
    size_t hit = name[0] == 'r' ? s.rfind(sub) : s.find(sub, from);
    if (hit != std::string::npos && hit < from) hit = std::string::npos;
    if (hit == std::string::npos) {
      if (name == "index" || name == "rindex") Fail("substring not found");
      return Value(int64_t{-1});
    }
    return Value(CodePointIndex(s, hit));
  }
  if (name == "count") {
    auto a = BindArgs(args, name, {"sub"});
    const std::string& sub = StrArg(a[0], "count");
    if (sub.empty()) return Value(py::Length(s) + 1);
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    auto a = BindArgs(args, name, {"iterable"});
    std::string out;
    size_t i = 0;
    for (const Value& v : Iterate(a[0])) {
      if (!v.IsString()) {
        Fail("sequence item " + std::to_string(i) + ": expected str instance, " + TypeName(v) +
             " found");
      }
      if (i++) out += s;
      out += v.AsString();
      CheckStringSize(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(PyFormat(s, args));
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") {
    BindArgs(args, name, {});
    return Value(AllChars(s, unicode::IsDigit));
  }
  if (name == "isalpha") return BindArgs(args, name, {}), Value(AllChars(s, unicode::IsAlpha));
  if (name == "isalnum") {
    BindArgs(args, name, {});
    return Value(
        AllChars(s, [](char32_t c) { return unicode::IsAlpha(c) || unicode::IsDigit(c); }));
  }
  if (name == "isspace") return BindArgs(args, name, {}), Value(AllChars(s, unicode::IsPySpace));
  if (name == "islower") return BindArgs(args, name, {}), Value(py::IsLowerCased(s));
  if (name == "isupper") return BindArgs(args, name, {}), Value(py::IsUpperCased(s));
  if (name == "center" || name == "ljust" || name == "rjust") {
    auto a = BindArgs(args, name, {"width", "fillchar"});
    std::string fill = a[1].IsUndefined() ? " " : StrArg(a[1], name.c_str());
    return Value(
        Pad(s, IntArg(a[0], 0, "width"), fill, name == "ljust" ? -1 : (name == "rjust" ? 1 : 0)));
  }
  if (name == "zfill") {
    auto a = BindArgs(args, name, {"width"});
    int64_t width = IntArg(a[0], 0, "width");
    int64_t len = py::Length(s);
    if (width <= len) return Value(s);
    CheckStringSize(static_cast<uint64_t>(width - len) + s.size());
    std::string zeros(static_cast<size_t>(width - len), '0');
    if (!s.empty() && (s[0] == '-' || s[0] == '+'))
      return Value(s.substr(0, 1) + zeros + s.substr(1));
    return Value(zeros + s);
  }
  if (name == "partition" || name == "rpartition") {
    auto a = BindArgs(args, name, {"sep"});
    const std::string& sep = StrArg(a[0], name.c_str());
    if (sep.empty()) Fail("empty separator");
    size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos) {
      return name == "partition" ? Value::List({Value(s), Value(""), Value("")}, true)
                                 : Value::List({Value(""), Value(""), Value(s)}, true);
    }
    return Value::List({Value(s.substr(0, hit)), Value(sep), Value(s.substr(hit + sep.size()))},
                       true);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto a = BindArgs(args, name, {"affix"});
    const std::string& p = StrArg(a[0], name.c_str());
    if (name == "removeprefix")
      return Value(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
    bool ends = s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
    return Value(ends && !p.empty() ? s.substr(0, s.size() - p.size()) : s);
  }
  Fail("'str' object has no attribute '" + name + "'");
}

Value CallDictMethod(const Value& d, const std::string& name, CallArgs& args) {
  if (name == "get") {
    auto a = BindArgs(args, name, {"key", "default"});
    if (const Value* v = d.AsDict().Find(a[0])) return *v;
    return a[1].IsUndefined() ? Value::None() : a[1];
  }
  BindArgs(args, name, {});
  std::vector<Value> out;
  for (const auto& [k, v] : d.AsDict().entries) {
    if (name == "items") {
      out.push_back(Value::List({k, v}, true));
    } else {
      out.push_back(name == "keys" ? k : v);
    }
  }
  if (name == "copy") return Value::Dict(std::make_shared<DictData>(d.AsDict()));
  return Value::List(std::move(out));
}

Value CallListMethod(const Value& l, const std::string& name, CallArgs& args) {
  auto a = BindArgs(args, name, {"value"});
  int64_t n = 0;
  const auto& items = l.AsList().items;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!Equals(items[i], a[0])) continue;
    if (name == "index") return Value(static_cast<int64_t>(i));
    ++n;
  }
  if (name == "index") Fail(Repr(a[0]) + " is not in list");
  return Value(n);
}

const std::unordered_set<std::string> kStrMethods = {
    "strip",      "lstrip",   "rstrip",    "split",      "rsplit",       "splitlines",
    "startswith", "endswith", "upper",     "lower",      "title",        "capitalize",
    "replace",    "find",     "rfind",     "index",      "rindex",       "count",
    "join",       "format",   "isdigit",   "isdecimal",  "isnumeric",    "isalpha",
    "isalnum",    "isspace",  "islower",   "isupper",    "center",       "ljust",
    "rjust",      "zfill",    "partition", "rpartition", "removeprefix", "removesuffix"};
const std::unordered_set<std::string> kDictMethods = {"get", "items", "keys", "values", "copy"};
const std::unordered_set<std::string> kDictMutators = {"update", "pop", "popitem", "setdefault",
                                                       "clear"};
const std::unordered_set<std::string> kListMethods = {"index", "count"};
const std::unordered_set<std::string> kListMutators = {"append", "extend",  "insert", "pop",
                                                       "remove", "reverse", "sort",   "clear"};

Value Unsafe(const std::string& name, const std::string& type) {
  return Value::Undefined("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
}

}  // namespace

std::optional<Value> BoundMethod(const Value& obj, const std::string& name) {
  if (obj.IsString() && kStrMethods.count(name)) {
    // The value, not a copy of its text: strings are shared, and may be long.
    return Value::Function("str." + name, [obj, name](CallArgs& args, Evaluator&) {
      return CallStrMethod(obj.AsString(), name, args);
    });
  }
  if (obj.IsDict()) {
    if (kDictMutators.count(name)) return Unsafe(name, "dict");
    if (kDictMethods.count(name)) {
      return Value::Function("dict." + name, [obj, name](CallArgs& args, Evaluator&) {
        return CallDictMethod(obj, name, args);
      });
    }
  }
  if (obj.IsList()) {
    const std::string type = obj.AsList().is_tuple ? "tuple" : "list";
    if (!obj.AsList().is_tuple && kListMutators.count(name)) return Unsafe(name, type);
    if (kListMethods.count(name)) {
      return Value::Function(type + "." + name, [obj, name](CallArgs& args, Evaluator&) {
        return CallListMethod(obj, name, args);
      });
    }
  }
  return std::nullopt;
}

}  // namespace m3::tmpl
