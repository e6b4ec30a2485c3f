// Python operator semantics (see operators.h). Integers are 64-bit; an overflow is reported
// instead of silently wrapping (Python would switch to big integers).
#include "gateway/template/operators.h"

#include <cmath>

#include "gateway/template/render_budget.h"
#include "gateway/template/render_error.h"

namespace m3::tmpl {

namespace {

[[noreturn]] void Unsupported(const std::string& op, const Value& a, const Value& b) {
  Fail("unsupported operand type(s) for " + op + ": '" + TypeName(a) + "' and '" + TypeName(b) +
       "'");
}

int64_t Checked(bool overflow, int64_t v) {
  if (overflow) Fail("integer overflow");
  return v;
}

uint64_t SaturatingProduct(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

// Sized before anything is allocated: "x" * 10**12 must fail here, not in operator new.
Value Repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.IsString()) {
    CheckStringSize(SaturatingProduct(seq.AsString().size(), static_cast<uint64_t>(n)));
    std::string out;
    out.reserve(seq.AsString().size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.AsString();
    return Value(std::move(out));
  }
  const auto& items = seq.AsList().items;
  CheckListSize(SaturatingProduct(items.size(), static_cast<uint64_t>(n)));
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::List(std::move(out), seq.AsList().is_tuple);
}

double FloorMod(double x, double y) {
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return m;
}

}  // namespace

Value BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(ToStr(a) + ToStr(b));
  a.Defined();
  b.Defined();
  const bool nums = a.IsNumber() && b.IsNumber();
  const bool ints = nums && !a.IsFloat() && !b.IsFloat();
  if (op == "+") {
    if (ints) {
      int64_t r = 0;
      bool overflow = __builtin_add_overflow(a.AsInt(), b.AsInt(), &r);
      return Value(Checked(overflow, r));
    }
    if (nums) return Value(a.AsDouble() + b.AsDouble());
    if (a.IsString() && b.IsString()) return Value(a.AsString() + b.AsString());
    if (a.IsList() && b.IsList() && a.AsList().is_tuple == b.AsList().is_tuple) {
      std::vector<Value> items = a.AsList().items;
      items.insert(items.end(), b.AsList().items.begin(), b.AsList().items.end());
      return Value::List(std::move(items), a.AsList().is_tuple);
    }
    if (a.IsString()) Fail("can only concatenate str (not \"" + TypeName(b) + "\") to str");
    if (a.IsList()) Fail("can only concatenate list (not \"" + TypeName(b) + "\") to list");
    Unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      bool overflow = __builtin_sub_overflow(a.AsInt(), b.AsInt(), &r);
      return Value(Checked(overflow, r));
    }
    if (nums) return Value(a.AsDouble() - b.AsDouble());
    Unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r = 0;
      bool overflow = __builtin_mul_overflow(a.AsInt(), b.AsInt(), &r);
      return Value(Checked(overflow, r));
    }
    if (nums) return Value(a.AsDouble() * b.AsDouble());
    if ((a.IsString() || a.IsList()) && (b.IsInt() || b.IsBool())) return Repeat(a, b.AsInt());
    if ((b.IsString() || b.IsList()) && (a.IsInt() || a.IsBool())) return Repeat(b, a.AsInt());
    Unsupported(op, a, b);
  }
  if (!nums) Unsupported(op, a, b);
  if (op == "/") {
    if (b.AsDouble() == 0) Fail("division by zero");
    return Value(a.AsDouble() / b.AsDouble());
  }
  if (op == "//") {
    if (b.AsDouble() == 0)
      Fail(ints ? "integer division or modulo by zero" : "float floor division by zero");
    if (ints) {
      int64_t x = a.AsInt(), y = b.AsInt();
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value(q);
    }
    return Value(std::floor(a.AsDouble() / b.AsDouble()));
  }
  if (op == "%") {
    if (b.AsDouble() == 0) Fail(ints ? "integer division or modulo by zero" : "float modulo");
    if (ints) {
      int64_t x = a.AsInt(), y = b.AsInt();
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    return Value(FloorMod(a.AsDouble(), b.AsDouble()));
  }
  if (op == "**") {
    if (ints && b.AsInt() >= 0) {
      int64_t base = a.AsInt(), e = b.AsInt(), r = 1;
      while (e > 0) {
        if ((e & 1) && __builtin_mul_overflow(r, base, &r)) Fail("integer overflow");
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) Fail("integer overflow");
      }
      return Value(r);
    }
    if (a.AsDouble() == 0 && b.AsDouble() < 0) Fail("0.0 cannot be raised to a negative power");
    return Value(std::pow(a.AsDouble(), b.AsDouble()));
  }
  Fail("unknown operator " + op);
}

Value Negate(const Value& v) {
  v.Defined();
  if (v.IsFloat()) return Value(-v.AsDouble());
  if (v.IsInt() || v.IsBool()) {
    if (v.AsInt() == INT64_MIN) Fail("integer overflow");
    return Value(-v.AsInt());
  }
  Fail("bad operand type for unary -: '" + TypeName(v) + "'");
}

Value Positive(const Value& v) {
  v.Defined();
  if (v.IsFloat()) return v;
  if (v.IsInt() || v.IsBool()) return Value(v.AsInt());
  Fail("bad operand type for unary +: '" + TypeName(v) + "'");
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.IsString()) {
        Fail("'in <string>' requires string as left operand, not " + TypeName(item));
      }
      ChargeSteps(static_cast<int64_t>(container.AsString().size() / 64));
      return container.AsString().find(item.AsString()) != std::string::npos;
    case Value::Kind::kList:
      ChargeSteps(static_cast<int64_t>(container.AsList().items.size()));
      for (const Value& v : container.AsList().items) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return container.AsDict().Find(item) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      Fail("argument of type '" + TypeName(container) + "' is not iterable");
  }
}

bool CompareOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in") return Contains(b, a);
  if (op == "notin") return !Contains(b, a);
  if (op == "<") return Compare(a, b, "<") < 0;
  if (op == "<=") return Compare(a, b, "<=") <= 0;
  if (op == ">") return Compare(a, b, ">") > 0;
  if (op == ">=") return Compare(a, b, ">=") >= 0;
  Fail("unknown comparison " + op);
}

}  // namespace m3::tmpl
