// jinja2 builtin tests (see predicates.h). Python's type model shows through: bool counts as a
// number but not as an integer, and undefined is iterable and a sequence.
#include "gateway/template/predicates.h"

#include <unordered_map>

#include "gateway/template/call_args.h"
#include "gateway/template/operators.h"
#include "gateway/template/py_text.h"
#include "gateway/template/render_error.h"

namespace m3::tmpl {

namespace {

Value Arg(CallArgs& args, const char* test, const char* param) {
  auto a = BindArgs(args, test, {param});
  if (args.positional.empty() && args.keyword.empty()) {
    Fail(std::string(test) + "() missing 1 required positional argument: '" + param + "'");
  }
  return a[0];
}

bool NoArgs(CallArgs& args, const char* name) {
  BindArgs(args, name, {});
  return true;
}

bool TDefined(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "defined") && !v.IsUndefined();
}
bool TUndefined(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "undefined") && v.IsUndefined();
}
bool TNone(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "none") && v.IsNone();
}
bool TString(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "string") && v.IsString();
}
bool TMapping(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "mapping") && v.IsDict();
}
bool TIterable(const Value& v, CallArgs& a, Evaluator&) {
  NoArgs(a, "iterable");
  return v.IsUndefined() || v.IsString() || v.IsList() || v.IsDict();
}
bool TSequence(const Value& v, CallArgs& a, Evaluator&) {
  NoArgs(a, "sequence");
  return v.IsUndefined() || v.IsString() || v.IsList() || v.IsDict();
}
bool TNumber(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "number") && v.IsNumber();
}
bool TInteger(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "integer") && v.IsInt();
}
bool TFloat(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "float") && v.IsFloat();
}
bool TBoolean(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "boolean") && v.IsBool();
}
bool TTrue(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "true") && v.IsBool() && v.AsBool();
}
bool TFalse(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "false") && v.IsBool() && !v.AsBool();
}
bool TCallable(const Value& v, CallArgs& a, Evaluator&) {
  return NoArgs(a, "callable") && v.IsFunction();
}
bool TEscaped(const Value&, CallArgs& a, Evaluator&) {
  return !NoArgs(a, "escaped");
}

int64_t IntOperand(const Value& v, const char* test) {
  v.Defined();
  if (v.IsInt() || v.IsBool()) return v.AsInt();
  Fail(std::string("test '") + test + "' needs an integer, got '" + TypeName(v) + "'");
}

bool TOdd(const Value& v, CallArgs& a, Evaluator&) {
  NoArgs(a, "odd");
  int64_t m = IntOperand(v, "odd") % 2;
  return m != 0;
}
bool TEven(const Value& v, CallArgs& a, Evaluator&) {
  NoArgs(a, "even");
  return IntOperand(v, "even") % 2 == 0;
}
bool TDivisibleBy(const Value& v, CallArgs& a, Evaluator&) {
  Value n = Arg(a, "divisibleby", "num");
  return Equals(BinaryOp("%", v, n), Value(int64_t{0}));
}
bool TEq(const Value& v, CallArgs& a, Evaluator&) {
  return Equals(v, Arg(a, "eq", "other"));
}
bool TNe(const Value& v, CallArgs& a, Evaluator&) {
  return !Equals(v, Arg(a, "ne", "other"));
}
bool TLt(const Value& v, CallArgs& a, Evaluator&) {
  return CompareOp("<", v, Arg(a, "lt", "other"));
}
bool TLe(const Value& v, CallArgs& a, Evaluator&) {
  return CompareOp("<=", v, Arg(a, "le", "other"));
}
bool TGt(const Value& v, CallArgs& a, Evaluator&) {
  return CompareOp(">", v, Arg(a, "gt", "other"));
}
bool TGe(const Value& v, CallArgs& a, Evaluator&) {
  return CompareOp(">=", v, Arg(a, "ge", "other"));
}
bool TIn(const Value& v, CallArgs& a, Evaluator&) {
  return Contains(Arg(a, "in", "seq"), v);
}
bool TLower(const Value& v, CallArgs& a, Evaluator&) {
  NoArgs(a, "lower");
  return py::IsLowerCased(ToStr(v));
}
bool TUpper(const Value& v, CallArgs& a, Evaluator&) {
  NoArgs(a, "upper");
  return py::IsUpperCased(ToStr(v));
}
bool TSameAs(const Value& v, CallArgs& a, Evaluator&) {
  Value o = Arg(a, "sameas", "other");
  if (v.kind() != o.kind()) return false;
  if (v.Identity() || o.Identity()) return v.Identity() == o.Identity();
  return Equals(v, o);
}

const std::unordered_map<std::string, TestFn>& Table() {
  static const std::unordered_map<std::string, TestFn> table = {
      {"defined", TDefined},
      {"undefined", TUndefined},
      {"none", TNone},
      {"string", TString},
      {"mapping", TMapping},
      {"iterable", TIterable},
      {"sequence", TSequence},
      {"number", TNumber},
      {"integer", TInteger},
      {"float", TFloat},
      {"boolean", TBoolean},
      {"true", TTrue},
      {"false", TFalse},
      {"callable", TCallable},
      {"odd", TOdd},
      {"even", TEven},
      {"divisibleby", TDivisibleBy},
      {"equalto", TEq},
      {"eq", TEq},
      {"==", TEq},
      {"ne", TNe},
      {"!=", TNe},
      {"lt", TLt},
      {"lessthan", TLt},
      {"<", TLt},
      {"le", TLe},
      {"<=", TLe},
      {"gt", TGt},
      {"greaterthan", TGt},
      {">", TGt},
      {"ge", TGe},
      {">=", TGe},
      {"in", TIn},
      {"lower", TLower},
      {"upper", TUpper},
      {"sameas", TSameAs},
      {"escaped", TEscaped},
  };
  return table;
}

}  // namespace

TestFn FindTest(const std::string& name) {
  auto it = Table().find(name);
  return it == Table().end() ? nullptr : it->second;
}

}  // namespace m3::tmpl
