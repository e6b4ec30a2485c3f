// Argument binding for native callables (see call_args.h).
#include "gateway/template/call_args.h"

#include "gateway/template/render_error.h"

namespace m3::tmpl {

std::vector<Value> BindArgs(const CallArgs& args, const std::string& function,
                            std::initializer_list<const char*> params) {
  std::vector<Value> out(params.size());
  if (args.positional.size() > params.size()) {
    Fail(function + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
         std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    for (const char* p : params) {
      if (key == p) break;
      ++i;
    }
    if (i == params.size()) {
      Fail(function + "() got an unexpected keyword argument '" + key + "'");
    }
    if (i < args.positional.size()) {
      Fail(function + "() got multiple values for argument '" + key + "'");
    }
    out[i] = value;
  }
  return out;
}

int64_t IntArg(const Value& v, int64_t fallback, const char* what) {
  if (v.IsUndefined()) return fallback;
  if (v.IsInt() || v.IsBool()) return v.AsInt();
  Fail(std::string(what) + " must be an integer, got '" + TypeName(v) + "'");
}

bool BoolArg(const Value& v, bool fallback) {
  if (v.IsUndefined()) return fallback;
  return Truthy(v);
}

}  // namespace m3::tmpl
