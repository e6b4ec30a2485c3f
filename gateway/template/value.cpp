// Value construction, Python truthiness/equality/ordering and str()/repr() text.
#include "gateway/template/value.h"

#include "gateway/template/py_text.h"
#include "gateway/template/render_budget.h"
#include "gateway/template/render_error.h"
#include "gateway/unicode/utf8.h"

namespace m3::tmpl {

// Lookups are linear, so a template probing a request's huge object pays for the scan.
const Value* DictData::Find(const Value& key) const {
  ChargeSteps(static_cast<int64_t>(entries.size() / 16));
  for (const auto& [k, v] : entries) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

Value* DictData::Find(const Value& key) {
  ChargeSteps(static_cast<int64_t>(entries.size() / 16));
  for (auto& [k, v] : entries) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

void DictData::Set(const Value& key, Value value) {
  if (is_namespace && value.HoldsNamespace()) {
    Fail("a namespace cannot hold another namespace, directly or inside a list or dict");
  }
  const int d = 1 + std::max(key.Depth(), value.Depth());
  CheckValueNesting(d);
  depth = std::max(depth, d);
  holds_namespace = holds_namespace || key.HoldsNamespace() || value.HoldsNamespace();
  if (Value* slot = Find(key)) {
    *slot = std::move(value);
  } else {
    CheckListSize(entries.size() + 1);
    entries.emplace_back(key, std::move(value));
  }
}

void DictData::Recount() {
  int d = 1;
  bool ns = false;
  for (const auto& [k, v] : entries) {
    d = std::max({d, 1 + k.Depth(), 1 + v.Depth()});
    ns = ns || k.HoldsNamespace() || v.HoldsNamespace();
  }
  CheckValueNesting(d);
  depth = d;
  holds_namespace = ns;
}

Value::Value(std::string s) : kind_(Kind::kString) {
  ChargeString(s.size());
  s_ = std::make_shared<const std::string>(std::move(s));
}

const std::string& Value::Empty() {
  static const std::string empty;
  return empty;
}

int Value::Depth() const {
  if (list_) return list_->depth;
  if (dict_) return dict_->depth;
  return 0;
}

bool Value::HoldsNamespace() const {
  if (kind_ == Kind::kNamespace) return true;
  if (list_) return list_->holds_namespace;
  if (dict_) return dict_->holds_namespace;
  return false;
}

Value Value::Undefined(std::string message) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(message));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::List(std::vector<Value> items, bool is_tuple) {
  CheckListSize(items.size());
  ChargeSteps(static_cast<int64_t>(items.size()));
  int depth = 1;
  bool ns = false;
  for (const Value& item : items) {
    depth = std::max(depth, 1 + item.Depth());
    ns = ns || item.HoldsNamespace();
  }
  CheckValueNesting(depth);
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ListData>();
  v.list_->items = std::move(items);
  v.list_->is_tuple = is_tuple;
  v.list_->depth = depth;
  v.list_->holds_namespace = ns;
  return v;
}

Value Value::Dict() {
  return Dict(std::make_shared<DictData>());
}

Value Value::Dict(std::shared_ptr<DictData> data) {
  CheckListSize(data->entries.size());
  ChargeSteps(static_cast<int64_t>(data->entries.size()));
  data->is_namespace = false;
  data->Recount();
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::move(data);
  return v;
}

Value Value::Namespace() {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.dict_ = std::make_shared<DictData>();
  v.dict_->is_namespace = true;
  return v;
}

Value Value::Function(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.fn_ = std::make_shared<FunctionData>(FunctionData{std::move(name), std::move(fn)});
  return v;
}

namespace {

// Request values become template values before the template runs; the depth is checked
// before each descent, so a request nested 100k deep fails here instead of on the stack.
Value FromJsonAt(const nlohmann::ordered_json& j, int depth);

}  // namespace

Value Value::FromJson(const nlohmann::ordered_json& j) {
  return FromJsonAt(j, 0);
}

namespace {

Value FromJsonAt(const nlohmann::ordered_json& j, int depth) {
  if ((j.is_array() || j.is_object()) && depth >= ActiveLimits().max_nesting) {
    FailLimit("template context value nested deeper than " +
              std::to_string(ActiveLimits().max_nesting));
  }
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      CheckListSize(j.size());
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonAt(e, depth + 1));
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      CheckListSize(j.size());
      auto d = std::make_shared<DictData>();
      d->entries.reserve(j.size());
      for (const auto& [k, e] : j.items())
        d->entries.emplace_back(Value(k), FromJsonAt(e, depth + 1));
      return Value::Dict(std::move(d));
    }
    default:
      return Value::None();
  }
}

}  // namespace

double Value::AsDouble() const {
  if (kind_ == Kind::kFloat) return f_;
  return static_cast<double>(AsInt());
}

const void* Value::Identity() const {
  if (list_) return list_.get();
  if (dict_) return dict_.get();
  if (fn_) return fn_.get();
  return nullptr;
}

const Value& Value::Defined() const {
  if (IsUndefined()) Fail(AsString().empty() ? "value is undefined" : AsString());
  return *this;
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.AsBool();
    case Value::Kind::kInt:
      return v.AsInt() != 0;
    case Value::Kind::kFloat:
      return v.AsDouble() != 0.0;
    case Value::Kind::kString:
      return !v.AsString().empty();
    case Value::Kind::kList:
      return !v.AsList().items.empty();
    case Value::Kind::kDict:
      return !v.AsDict().entries.empty();
    default:
      return true;
  }
}

bool Equals(const Value& a, const Value& b) {
  if (a.IsNumber() && b.IsNumber()) {
    if (a.IsFloat() || b.IsFloat()) return a.AsDouble() == b.AsDouble();
    return a.AsInt() == b.AsInt();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      ChargeSteps(static_cast<int64_t>(std::min(a.AsString().size(), b.AsString().size()) / 64));
      return a.AsString() == b.AsString();
    case Value::Kind::kList: {
      const auto& x = a.AsList();
      const auto& y = b.AsList();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      ChargeSteps(static_cast<int64_t>(x.items.size()));
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!Equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const auto& x = a.AsDict();
      const auto& y = b.AsDict();
      if (x.entries.size() != y.entries.size()) return false;
      ChargeSteps(static_cast<int64_t>(x.entries.size()));
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.Find(k);
        if (!other || !Equals(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.Identity() == b.Identity();
  }
}

int Compare(const Value& a, const Value& b, const char* op) {
  a.Defined();
  b.Defined();
  if (a.IsNumber() && b.IsNumber()) {
    if (a.IsFloat() || b.IsFloat()) {
      double x = a.AsDouble(), y = b.AsDouble();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.AsInt(), y = b.AsInt();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.IsString() && b.IsString()) {
    ChargeSteps(static_cast<int64_t>(std::min(a.AsString().size(), b.AsString().size()) / 64));
    int c = a.AsString().compare(b.AsString());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.IsList() && b.IsList() && a.AsList().is_tuple == b.AsList().is_tuple) {
    const auto& x = a.AsList().items;
    const auto& y = b.AsList().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  Fail(std::string("'") + op + "' not supported between instances of '" + TypeName(a) + "' and '" +
       TypeName(b) + "'");
}

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return v.AsList().is_tuple ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kFunction:
      return "function";
    case Value::Kind::kNamespace:
      return "Namespace";
  }
  return "object";
}

namespace {

void AppendRepr(std::string& out, const Value& v);

void AppendItems(std::string& out, const Value& v) {
  if (v.IsList()) {
    const auto& l = v.AsList();
    out += l.is_tuple ? '(' : '[';
    for (size_t i = 0; i < l.items.size(); ++i) {
      if (i) out += ", ";
      AppendRepr(out, l.items[i]);
      CheckStringSize(out.size());  // items may be shared: the text can outgrow the value
    }
    if (l.is_tuple && l.items.size() == 1) out += ',';
    out += l.is_tuple ? ')' : ']';
    return;
  }
  out += '{';
  bool first = true;
  for (const auto& [k, e] : v.AsDict().entries) {
    if (!first) out += ", ";
    first = false;
    AppendRepr(out, k);
    out += ": ";
    AppendRepr(out, e);
    CheckStringSize(out.size());
  }
  out += '}';
}

void AppendRepr(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      out += py::StrRepr(v.AsString());
      return;
    case Value::Kind::kUndefined:
      out += "Undefined";
      return;
    case Value::Kind::kList:
    case Value::Kind::kDict:
      AppendItems(out, v);
      return;
    default:
      out += ToStr(v);
  }
}

}  // namespace

std::string ToStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.AsBool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.AsInt());
    case Value::Kind::kFloat:
      return py::FloatRepr(v.AsDouble());
    case Value::Kind::kString:
      return v.AsString();
    case Value::Kind::kList:
    case Value::Kind::kDict: {
      std::string out;
      AppendItems(out, v);
      return out;
    }
    case Value::Kind::kFunction:
      return "<function " + v.AsFunction().name + ">";
    case Value::Kind::kNamespace: {
      std::string out = "<Namespace ";
      AppendItems(out, Value::Dict(std::make_shared<DictData>(v.AsDict())));
      return out + ">";
    }
  }
  return "";
}

std::string Repr(const Value& v) {
  std::string out;
  AppendRepr(out, v);
  return out;
}

int64_t Len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return py::Length(v.AsString());
    case Value::Kind::kList:
      return static_cast<int64_t>(v.AsList().items.size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.AsDict().entries.size());
    default:
      Fail("object of type '" + TypeName(v) + "' has no len()");
  }
}

std::vector<Value> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      ChargeSteps(static_cast<int64_t>(v.AsList().items.size()));
      return v.AsList().items;
    case Value::Kind::kDict: {
      ChargeSteps(static_cast<int64_t>(v.AsDict().entries.size()));
      std::vector<Value> keys;
      keys.reserve(v.AsDict().entries.size());
      for (const auto& [k, e] : v.AsDict().entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.AsString();
      for (size_t i = 0; i < s.size();) {
        if (chars.size() % 4096 == 0) CheckListSize(chars.size() + 1);  // one item per character
        const size_t end = unicode::NextCodePointEnd(s, i);
        chars.emplace_back(s.substr(i, end - i));
        i = end;
      }
      ChargeSteps(static_cast<int64_t>(chars.size()));
      return chars;
    }
    default:
      Fail("'" + TypeName(v) + "' object is not iterable");
  }
}

}  // namespace m3::tmpl
