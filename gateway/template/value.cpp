// Value construction, Python truthiness/equality/ordering and str()/repr() text.
#include "gateway/template/value.h"

#include "gateway/template/py_text.h"
#include "gateway/template/render_error.h"
#include "gateway/unicode/utf8.h"

namespace m3::tmpl {

const Value* DictData::Find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

Value* DictData::Find(const Value& key) {
  for (auto& [k, v] : entries) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

void DictData::Set(const Value& key, Value value) {
  if (Value* slot = Find(key)) {
    *slot = std::move(value);
  } else {
    entries.emplace_back(key, std::move(value));
  }
}

Value Value::Undefined(std::string message) {
  Value v;
  v.s_ = std::move(message);
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::List(std::vector<Value> items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ListData>();
  v.list_->items = std::move(items);
  v.list_->is_tuple = is_tuple;
  return v;
}

Value Value::Dict() {
  return Dict(std::make_shared<DictData>());
}

Value Value::Dict(std::shared_ptr<DictData> data) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::move(data);
  return v;
}

Value Value::Namespace() {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.dict_ = std::make_shared<DictData>();
  return v;
}

Value Value::Function(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.fn_ = std::make_shared<FunctionData>(FunctionData{std::move(name), std::move(fn)});
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
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
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJson(e));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<DictData>();
      d->entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) d->entries.emplace_back(Value(k), FromJson(e));
      return Dict(std::move(d));
    }
    default:
      return None();
  }
}

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
  if (IsUndefined()) Fail(s_.empty() ? "value is undefined" : s_);
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
      return a.AsString() == b.AsString();
    case Value::Kind::kList: {
      const auto& x = a.AsList();
      const auto& y = b.AsList();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!Equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const auto& x = a.AsDict();
      const auto& y = b.AsDict();
      if (x.entries.size() != y.entries.size()) return false;
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
      return v.AsList().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.AsDict().entries.size());
      for (const auto& [k, e] : v.AsDict().entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.AsString();
      for (size_t i = 0; i < s.size();) {
        const size_t end = unicode::NextCodePointEnd(s, i);
        chars.emplace_back(s.substr(i, end - i));
        i = end;
      }
      return chars;
    }
    default:
      Fail("'" + TypeName(v) + "' object is not iterable");
  }
}

}  // namespace m3::tmpl
