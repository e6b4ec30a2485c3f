// The template value: a small variant with Python semantics (none, bool, int, float, str, list
// or tuple, dict with insertion order, function/macro, namespace, undefined). Containers are
// shared, so a namespace mutated inside a loop or a macro is seen by every holder.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace m3::tmpl {

class Value;
class Evaluator;

// depth and holds_namespace describe the items and are set when the value is made (lists and
// dicts are immutable to templates afterwards); they bound nesting without walking values.
struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;
  int depth = 1;
  bool holds_namespace = false;
};

// Insertion-ordered mapping; lookups are linear, which beats hashing for template-sized dicts.
struct DictData {
  std::vector<std::pair<Value, Value>> entries;
  int depth = 1;  // kept up to date by Set; recomputed by Value::Dict
  bool holds_namespace = false;
  bool is_namespace = false;
  const Value* Find(const Value& key) const;
  Value* Find(const Value& key);
  // Fails when the new value would nest the dict too deep, or put a namespace inside a
  // namespace (the one mutable container: forbidding that keeps values acyclic and their
  // recorded depths exact).
  void Set(const Value& key, Value value);
  void Recount();  // depth and holds_namespace from the entries
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFn = std::function<Value(CallArgs&, Evaluator&)>;

struct FunctionData {
  std::string name;
  NativeFn fn;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kFunction,
    kNamespace
  };

  Value() = default;  // undefined with no hint
  Value(bool b) : kind_(Kind::kBool), b_(b) {}
  Value(int v) : kind_(Kind::kInt), i_(v) {}
  Value(int64_t v) : kind_(Kind::kInt), i_(v) {}
  Value(double v) : kind_(Kind::kFloat), f_(v) {}
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}

  // `message` is the UndefinedError text used when the value is misused ("'x' is undefined").
  static Value Undefined(std::string message);
  static Value None();
  static Value List(std::vector<Value> items, bool is_tuple = false);
  static Value Dict();
  static Value Dict(std::shared_ptr<DictData> data);
  static Value Namespace();
  static Value Function(std::string name, NativeFn fn);
  // Fails when `j` nests deeper than the active limits allow (checked before recursing).
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool IsUndefined() const { return kind_ == Kind::kUndefined; }
  bool IsNone() const { return kind_ == Kind::kNone; }
  bool IsBool() const { return kind_ == Kind::kBool; }
  bool IsInt() const { return kind_ == Kind::kInt; }
  bool IsFloat() const { return kind_ == Kind::kFloat; }
  bool IsNumber() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool IsString() const { return kind_ == Kind::kString; }
  bool IsList() const { return kind_ == Kind::kList; }
  bool IsDict() const { return kind_ == Kind::kDict; }
  bool IsFunction() const { return kind_ == Kind::kFunction; }
  bool IsNamespace() const { return kind_ == Kind::kNamespace; }

  bool AsBool() const { return b_; }
  int64_t AsInt() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }  // int or bool
  double AsDouble() const;                                                    // any number
  const std::string& AsString() const { return s_ ? *s_ : Empty(); }
  const std::string& UndefinedMessage() const { return AsString(); }
  ListData& AsList() const { return *list_; }
  DictData& AsDict() const { return *dict_; }  // dict or namespace attributes
  const FunctionData& AsFunction() const { return *fn_; }
  const void* Identity() const;  // for `is sameas` on containers

  // Throws the UndefinedError when undefined; returns *this otherwise.
  const Value& Defined() const;

  int Depth() const;            // 0 for scalars, 1 + the items' depth for containers
  bool HoldsNamespace() const;  // is or contains a namespace

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  static const std::string& Empty();
  // Shared and immutable: values are copied freely (scope lookups, list repetition), so a
  // copy must not duplicate a long string.
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<ListData> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<FunctionData> fn_;
};

bool Truthy(const Value& v);
bool Equals(const Value& a, const Value& b);
int Compare(const Value& a, const Value& b, const char* op);  // <0, 0, >0; throws TypeError text
std::string ToStr(const Value& v);                            // Python str()
std::string Repr(const Value& v);                             // Python repr()
std::string TypeName(const Value& v);                         // Python type name
int64_t Len(const Value& v);                                  // Python len(); throws if none
// Python iter(): list items, dict keys, string characters, nothing for undefined.
std::vector<Value> Iterate(const Value& v);

}  // namespace m3::tmpl
