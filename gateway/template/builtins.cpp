// Global callables (see builtins.h). range() is materialized as a list, sized against the
// list limit before it is built.
#include "gateway/template/builtins.h"

#include <ctime>

#include "gateway/template/call_args.h"
#include "gateway/template/render_budget.h"
#include "gateway/template/render_error.h"

namespace m3::tmpl {

namespace {

Value Range(CallArgs& args, Evaluator&) {
  if (!args.keyword.empty()) Fail("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3)
    Fail("range expected at most 3 arguments, got " + std::to_string(p.size()));
  int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = IntArg(p[0], 0, "range() argument");
  } else {
    start = IntArg(p[0], 0, "range() argument");
    stop = IntArg(p[1], 0, "range() argument");
    if (p.size() == 3) step = IntArg(p[2], 1, "range() argument");
  }
  if (step == 0) Fail("range() arg 3 must not be zero");
  const __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 abs_step = step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
  CheckListSize(static_cast<uint64_t>(count));
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(count));
  for (__int128 i = 0; i < count; ++i) out.emplace_back(static_cast<int64_t>(start + i * step));
  return Value::List(std::move(out));
}

void FillDict(DictData& d, CallArgs& args, const char* fn) {
  if (args.positional.size() > 1) Fail(std::string(fn) + " expected at most 1 positional argument");
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (init.IsDict() || init.IsNamespace()) {
      for (const auto& [k, v] : init.AsDict().entries) d.Set(k, v);
    } else {
      for (const Value& pair : Iterate(init)) {
        std::vector<Value> kv = Iterate(pair);
        if (kv.size() != 2) Fail(std::string(fn) + " update sequence element has wrong length");
        d.Set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.Set(Value(k), v);
}

Value Namespace(CallArgs& args, Evaluator&) {
  Value ns = Value::Namespace();
  FillDict(ns.AsDict(), args, "namespace");
  return ns;
}

Value Dict(CallArgs& args, Evaluator&) {
  Value d = Value::Dict();
  FillDict(d.AsDict(), args, "dict");
  return d;
}

Value RaiseException(CallArgs& args, Evaluator&) {
  auto a = BindArgs(args, "raise_exception", {"message"});
  throw RaisedError(ToStr(a[0]));
}

Value StrftimeNow(CallArgs& args, Evaluator&) {
  auto a = BindArgs(args, "strftime_now", {"format"});
  std::string fmt = ToStr(a[0]);
  if (fmt.size() > 4096) Fail("strftime_now: format longer than 4096 bytes");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string buf(fmt.size() * 4 + 64, '\0');
  size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &local);
  if (n == 0 && !fmt.empty()) Fail("strftime_now: format produced no output or was too long");
  buf.resize(n);
  return Value(std::move(buf));
}

Value Joiner(CallArgs& args, Evaluator&) {
  auto a = BindArgs(args, "joiner", {"sep"});
  std::string sep = a[0].IsUndefined() ? ", " : ToStr(a[0]);
  auto used = std::make_shared<bool>(false);
  return Value::Function("joiner", [sep, used](CallArgs&, Evaluator&) {
    if (!*used) {
      *used = true;
      return Value("");
    }
    return Value(sep);
  });
}

}  // namespace

void AddBuiltins(DictData& globals) {
  globals.Set(Value("range"), Value::Function("range", Range));
  globals.Set(Value("namespace"), Value::Function("namespace", Namespace));
  globals.Set(Value("dict"), Value::Function("dict", Dict));
  globals.Set(Value("raise_exception"), Value::Function("raise_exception", RaiseException));
  globals.Set(Value("strftime_now"), Value::Function("strftime_now", StrftimeNow));
  globals.Set(Value("joiner"), Value::Function("joiner", Joiner));
}

}  // namespace m3::tmpl
