// Template evaluation (see evaluator.h). Scoping follows jinja2: each loop iteration and each
// macro call gets a child scope whose assignments vanish afterwards, while `if`, `generation`
// and top-level statements assign into the enclosing scope; namespaces are shared objects, so
// `{% set ns.x = ... %}` is the one way a loop body changes state outside itself.
#include "gateway/template/evaluator.h"

#include "gateway/template/builtins.h"
#include "gateway/template/filters.h"
#include "gateway/template/methods.h"
#include "gateway/template/operators.h"
#include "gateway/template/predicates.h"
#include "gateway/template/py_text.h"
#include "gateway/template/render_budget.h"
#include "gateway/template/render_error.h"
#include "gateway/unicode/utf8.h"
#include "shared/error.h"

namespace m3::tmpl {

namespace {

std::string ObjectTypeRepr(const Value& obj) {
  if (obj.IsNone()) return "None";
  return TypeName(obj) + " object";
}

Value MissingAttr(const Value& obj, const std::string& name) {
  // Built with append: GCC 12 reports a false -Wrestrict on the operator+ chain here.
  std::string message = "'";
  message.append(ObjectTypeRepr(obj)).append("' has no attribute '").append(name).append("'");
  return Value::Undefined(std::move(message));
}

Value MissingItem(const Value& obj, const Value& key) {
  if (key.IsString()) return MissingAttr(obj, key.AsString());
  std::string message = "'";
  message.append(ObjectTypeRepr(obj)).append("' has no element ").append(Repr(key));
  return Value::Undefined(std::move(message));
}

// Python slice semantics over a sequence of length n: calls visit(i) for each index taken.
template <typename Visit>
void ForSliceIndices(int64_t n, const Value& start, const Value& stop, const Value& step,
                     Visit visit) {
  auto as_int = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.IsUndefined() || v.IsNone()) return std::nullopt;
    if (!v.IsInt() && !v.IsBool()) {
      Fail(std::string("slice ") + what + " must be an integer or None, got '" + TypeName(v) + "'");
    }
    return v.AsInt();
  };
  int64_t st = as_int(step, "step").value_or(1);
  if (st == 0) Fail("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x = x < -n ? -n - 1 : x + n;  // no overflow for INT64_MIN
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t b = clamp(as_int(start, "start"), st > 0 ? 0 : n - 1);
  int64_t e = clamp(as_int(stop, "stop"), st > 0 ? n : -1);
  // b and e lie in [-1, n]; a step as large as INT64_MAX must not overflow i, so the next
  // index is taken only while it stays inside the range.
  if (st > 0) {
    for (int64_t i = b; i<e; i = (e - i) - st> 0 ? i + st : e) visit(i);
  } else {
    for (int64_t i = b; i > e; i = (i - e) + st > 0 ? i + st : e) visit(i);
  }
}

Value SliceValue(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  obj.Defined();
  if (obj.IsString()) {
    ChargeSteps(static_cast<int64_t>(obj.AsString().size() / 64));  // decoded whole
    std::u32string u = unicode::DecodeLossy(obj.AsString());
    std::u32string out;
    ForSliceIndices(static_cast<int64_t>(u.size()), start, stop, step,
                    [&](int64_t i) { out.push_back(u[static_cast<size_t>(i)]); });
    return Value(unicode::Encode(out));
  }
  if (obj.IsList()) {
    const auto& items = obj.AsList().items;
    std::vector<Value> out;
    ForSliceIndices(static_cast<int64_t>(items.size()), start, stop, step,
                    [&](int64_t i) { out.push_back(items[static_cast<size_t>(i)]); });
    return Value::List(std::move(out), obj.AsList().is_tuple);
  }
  Fail("'" + TypeName(obj) + "' object is not subscriptable");
}

Value MakeLoop(const std::vector<Value>& items, size_t i) {
  auto d = std::make_shared<DictData>();
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t k = static_cast<int64_t>(i);
  d->entries.reserve(12);
  d->entries.emplace_back(Value("index"), Value(k + 1));
  d->entries.emplace_back(Value("index0"), Value(k));
  d->entries.emplace_back(Value("revindex"), Value(n - k));
  d->entries.emplace_back(Value("revindex0"), Value(n - k - 1));
  d->entries.emplace_back(Value("first"), Value(k == 0));
  d->entries.emplace_back(Value("last"), Value(k == n - 1));
  d->entries.emplace_back(Value("length"), Value(n));
  d->entries.emplace_back(Value("depth"), Value(int64_t{1}));
  d->entries.emplace_back(Value("depth0"), Value(int64_t{0}));
  d->entries.emplace_back(Value("previtem"),
                          k > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
  d->entries.emplace_back(Value("nextitem"),
                          k + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
  d->entries.emplace_back(Value("cycle"),
                          Value::Function("loop.cycle", [k](CallArgs& args, Evaluator&) {
                            if (args.positional.empty()) Fail("no items for cycling given");
                            return args.positional[static_cast<size_t>(k) % args.positional.size()];
                          }));
  return Value::Dict(std::move(d));
}

}  // namespace

Evaluator::DepthGuard::DepthGuard(Evaluator& ev) : ev_(ev) {
  if (++ev_.eval_depth_ > ev_.limits_.max_eval_depth) {
    --ev_.eval_depth_;
    FailLimit("template evaluation nested deeper than " +
              std::to_string(ev_.limits_.max_eval_depth));
  }
  if (StackNearlyExhausted()) {
    --ev_.eval_depth_;
    FailLimit("template evaluation nested too deep for the thread's stack");
  }
}

Evaluator::Evaluator(const Program& program, const nlohmann::ordered_json& context,
                     const TemplateLimits& limits)
    : program_(program), context_(context), limits_(limits) {
  if (!context.is_object() && !context.is_null()) {
    throw Error(ErrorCode::kInvalidArgument, "chat template context must be a JSON object");
  }
}

std::string Evaluator::Render() {
  std::string out;
  auto root = std::make_shared<Scope>();
  RenderBudget budget(limits_);
  try {
    AddBuiltins(globals_);
    if (context_.is_object()) {
      for (const auto& [k, v] : context_.items()) globals_.Set(Value(k), Value::FromJson(v));
    }
    RenderBody(program_.body, root, out);
  } catch (const LimitError& e) {
    throw Error(ErrorCode::kTooLarge,
                program_.name + ":" + std::to_string(line_) + ": " + e.what());
  } catch (const RaisedError& e) {
    throw Error(ErrorCode::kInvalidArgument,
                program_.name + ":" + std::to_string(line_) + ": template raised: " + e.what());
  } catch (const RenderError& e) {
    throw Error(ErrorCode::kInvalidArgument,
                program_.name + ":" + std::to_string(line_) + ": " + e.what());
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    // The limits should make this unreachable; if not, the request fails, not the server.
    throw Error(ErrorCode::kResourceExhausted, program_.name + ":" + std::to_string(line_) +
                                                   ": template rendering ran out of memory");
  } catch (const std::exception& e) {
    // A fault of the engine, not of the template: reported as internal, never a crash.
    throw Error(ErrorCode::kInternal, program_.name + ":" + std::to_string(line_) +
                                          ": template engine fault: " + e.what());
  }
  return out;
}

Evaluator::Flow Evaluator::RenderBody(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& s : body) {
    Flow f = RenderStmt(*s, scope, out);
    // Every buffer (the output, a macro's or a block's) is held to the output limit.
    if (out.size() > static_cast<uint64_t>(limits_.max_output_bytes)) {
      FailLimit("template output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
    }
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::RenderStmt(const Stmt& s, const ScopePtr& scope, std::string& out) {
  DepthGuard guard(*this);
  ChargeSteps(1);
  line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::kText:
      out += s.text;
      return Flow::kNormal;
    case Stmt::Kind::kPrint:
      out += ToStr(Eval(*s.expr, scope));
      return Flow::kNormal;
    case Stmt::Kind::kIf:
      for (const auto& [cond, body] : s.branches) {
        if (Truthy(Eval(*cond, scope))) return RenderBody(body, scope, out);
      }
      return RenderBody(s.else_body, scope, out);
    case Stmt::Kind::kFor:
      RenderFor(s, scope, out);
      return Flow::kNormal;
    case Stmt::Kind::kSet:
      RenderSet(s, scope);
      return Flow::kNormal;
    case Stmt::Kind::kMacro:
      scope->vars[s.name] = MakeMacro(s, scope);
      return Flow::kNormal;
    case Stmt::Kind::kCallBlock: {
      // caller() renders the block body in a child of the current scope. The scope is held
      // weakly, as macros hold theirs: a caller stored in a namespace of that scope would
      // otherwise keep the scope alive through itself and leak it past the render.
      const Stmt* stmt = &s;
      std::weak_ptr<Scope> weak = scope;
      Value caller = Value::Function("caller", [this, stmt, weak](CallArgs& args, Evaluator&) {
        ScopePtr outer = weak.lock();
        if (!outer) Fail("caller() called after its block ended");
        auto child = std::make_shared<Scope>();
        child->parent = outer;
        for (size_t i = 0; i < stmt->params.size(); ++i) {
          const auto& p = stmt->params[i];
          if (i < args.positional.size()) {
            child->vars[p.name] = args.positional[i];
          } else if (p.default_value) {
            child->vars[p.name] = Eval(*p.default_value, child);
          }
        }
        for (auto& [k, v] : args.keyword) child->vars[k] = v;
        std::string body;
        RenderBody(stmt->body, child, body);
        return Value(std::move(body));
      });
      const Expr& call = *s.expr;
      Value fn = call.a->kind == Expr::Kind::kGetAttr
                     ? GetAttr(Eval(*call.a->a, scope), call.a->name)
                     : Eval(*call.a, scope);
      CallArgs args = EvalArgs(call, scope);
      args.keyword.emplace_back("caller", caller);
      line_ = s.line;
      out += ToStr(CallValue(fn, args));
      return Flow::kNormal;
    }
    case Stmt::Kind::kFilterBlock: {
      std::string body;
      RenderBody(s.body, scope, body);
      Value input(std::move(body));
      out += ToStr(EvalFilter(*s.filter, scope, &input));
      return Flow::kNormal;
    }
    case Stmt::Kind::kWith: {
      auto child = std::make_shared<Scope>();
      child->parent = scope;
      for (const auto& [target, expr] : s.assignments) Assign(target, Eval(*expr, scope), child);
      RenderBody(s.body, child, out);
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kScope:
      return RenderBody(s.body, scope, out);
  }
  return Flow::kNormal;
}

void Evaluator::RenderFor(const Stmt& s, const ScopePtr& scope, std::string& out) {
  Value iterable = Eval(*s.expr, scope);
  line_ = s.line;
  std::vector<Value> items = Iterate(iterable);
  RenderBudget& budget = *RenderBudget::Active();
  if (s.cond) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      budget.LoopIteration();
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      Assign(s.target, item, probe);
      if (Truthy(Eval(*s.cond, probe))) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    auto child = std::make_shared<Scope>();
    child->parent = scope;
    RenderBody(s.else_body, child, out);
    return;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    budget.LoopIteration();
    auto child = std::make_shared<Scope>();
    child->parent = scope;
    child->vars["loop"] = MakeLoop(items, i);
    line_ = s.line;
    Assign(s.target, items[i], child);
    if (RenderBody(s.body, child, out) == Flow::kBreak) break;
  }
}

void Evaluator::Assign(const Target& target, const Value& value, const ScopePtr& scope) {
  if (!target.is_tuple) {
    scope->vars[target.names[0]] = value;
    return;
  }
  std::vector<Value> parts = Iterate(value.Defined());
  if (parts.size() != target.names.size()) {
    Fail(parts.size() > target.names.size()
             ? "too many values to unpack (expected " + std::to_string(target.names.size()) + ")"
             : "not enough values to unpack (expected " + std::to_string(target.names.size()) +
                   ", got " + std::to_string(parts.size()) + ")");
  }
  for (size_t i = 0; i < parts.size(); ++i) scope->vars[target.names[i]] = parts[i];
}

void Evaluator::RenderSet(const Stmt& s, const ScopePtr& scope) {
  Value value;
  if (s.expr) {
    value = Eval(*s.expr, scope);
  } else {
    std::string body;
    RenderBody(s.body, scope, body);
    value = Value(std::move(body));
    if (s.filter) value = EvalFilter(*s.filter, scope, &value);
  }
  line_ = s.line;
  if (!s.target.attr.empty()) {
    Value ns = Lookup(s.target.names[0], scope);
    if (!ns.IsNamespace()) Fail("cannot assign attribute on non-namespace object");
    ns.AsDict().Set(Value(s.target.attr), std::move(value));
    return;
  }
  Assign(s.target, value, scope);
}

Value Evaluator::MakeMacro(const Stmt& s, const ScopePtr& scope) {
  const Stmt* stmt = &s;
  // The macro keeps its defining scope alive; a macro stored in its own scope forms a cycle,
  // which is released with the Evaluator's arena at the end of Render (scopes are small).
  std::weak_ptr<Scope> weak = scope;
  return Value::Function(s.name, [this, stmt, weak](CallArgs& args, Evaluator&) {
    ScopePtr def = weak.lock();
    if (!def) Fail("macro '" + stmt->name + "' called after its scope ended");
    return InvokeMacro(*stmt, def, args);
  });
}

Value Evaluator::InvokeMacro(const Stmt& s, const ScopePtr& def_scope, CallArgs& args) {
  if (macro_depth_ >= limits_.max_macro_depth) {
    Fail("maximum recursion depth exceeded in macro '" + s.name + "' (" +
         std::to_string(limits_.max_macro_depth) + " calls deep)");
  }
  auto scope = std::make_shared<Scope>();
  scope->parent = def_scope;
  std::vector<bool> set(s.params.size(), false);
  std::vector<Value> varargs;
  auto kwargs = std::make_shared<DictData>();
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < s.params.size()) {
      scope->vars[s.params[i].name] = args.positional[i];
      set[i] = true;
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  for (auto& [key, v] : args.keyword) {
    if (key == "caller") {
      scope->vars["caller"] = v;
      continue;
    }
    size_t i = 0;
    while (i < s.params.size() && s.params[i].name != key) ++i;
    if (i == s.params.size()) {
      kwargs->Set(Value(key), v);
      continue;
    }
    if (set[i]) Fail("macro '" + s.name + "' got multiple values for argument '" + key + "'");
    scope->vars[key] = v;
    set[i] = true;
  }
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (set[i]) continue;
    const auto& p = s.params[i];
    scope->vars[p.name] = p.default_value
                              ? Eval(*p.default_value, scope)
                              : Value::Undefined("parameter '" + p.name + "' was not provided");
  }
  scope->vars["varargs"] = Value::List(std::move(varargs), true);
  scope->vars["kwargs"] = Value::Dict(std::move(kwargs));
  ++macro_depth_;
  std::string out;
  try {
    RenderBody(s.body, scope, out);
  } catch (...) {
    --macro_depth_;
    throw;
  }
  --macro_depth_;
  return Value(std::move(out));
}

Value Evaluator::Lookup(const std::string& name, const ScopePtr& scope) {
  for (Scope* s = scope.get(); s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  if (const Value* g = globals_.Find(Value(name))) return *g;
  return Value::Undefined("'" + name + "' is undefined");
}

CallArgs Evaluator::EvalArgs(const Expr& e, const ScopePtr& scope) {
  CallArgs args;
  args.positional.reserve(e.args.size());
  for (const auto& a : e.args) args.positional.push_back(Eval(*a, scope));
  for (const auto& [k, a] : e.kwargs) args.keyword.emplace_back(k, Eval(*a, scope));
  return args;
}

Value Evaluator::CallValue(const Value& fn, CallArgs& args) {
  ChargeSteps(1);  // filters like map call back here once per item, outside Eval
  if (fn.IsFunction()) return fn.AsFunction().fn(args, *this);
  fn.Defined();
  Fail("'" + TypeName(fn) + "' object is not callable");
}

Value Evaluator::ApplyFilter(const std::string& name, const Value& input, CallArgs& args) {
  // Filters walk their input string (length, wordcount, upper...): a long string filtered in
  // a loop is paid for each time.
  ChargeSteps(1 + (input.IsString() ? static_cast<int64_t>(input.AsString().size() / 64) : 0));
  FilterFn f = FindFilter(name);
  if (!f) Fail("No filter named '" + name + "'.");
  return f(input, args, *this);
}

bool Evaluator::ApplyTest(const std::string& name, const Value& input, CallArgs& args) {
  ChargeSteps(1 + (input.IsString() ? static_cast<int64_t>(input.AsString().size() / 64) : 0));
  TestFn t = FindTest(name);
  if (!t) Fail("No test named '" + name + "'.");
  return t(input, args, *this);
}

Value Evaluator::GetAttr(const Value& obj, const std::string& name) {
  obj.Defined();
  if (!name.empty() && name[0] == '_') return MissingAttr(obj, name);  // sandbox: private attrs
  if (auto m = BoundMethod(obj, name)) return *m;
  if (obj.IsDict() || obj.IsNamespace()) {
    if (const Value* v = obj.AsDict().Find(Value(name))) return *v;
  }
  return MissingAttr(obj, name);
}

Value Evaluator::GetItem(const Value& obj, const Value& key) {
  obj.Defined();
  switch (obj.kind()) {
    case Value::Kind::kDict:
      if (const Value* v = obj.AsDict().Find(key)) return *v;
      break;
    case Value::Kind::kList:
      if (key.IsInt() || key.IsBool()) {
        int64_t n = static_cast<int64_t>(obj.AsList().items.size());
        int64_t i = key.AsInt();
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.AsList().items[static_cast<size_t>(i)];
      }
      break;
    case Value::Kind::kString:
      if (key.IsInt() || key.IsBool()) {
        ChargeSteps(static_cast<int64_t>(obj.AsString().size() / 64));  // decoded per lookup
        std::u32string u = unicode::DecodeLossy(obj.AsString());
        int64_t n = static_cast<int64_t>(u.size());
        int64_t i = key.AsInt();
        if (i < 0) i += n;
        if (i >= 0 && i < n)
          return Value(unicode::Encode(std::u32string(1, u[static_cast<size_t>(i)])));
      }
      break;
    default:
      break;
  }
  if (key.IsString()) return GetAttr(obj, key.AsString());
  return MissingItem(obj, key);
}

Value Evaluator::EvalFilter(const Expr& e, const ScopePtr& scope, const Value* block_input) {
  Value input = e.a ? (e.a->kind == Expr::Kind::kFilter ? EvalFilter(*e.a, scope, block_input)
                                                        : Eval(*e.a, scope))
                    : *block_input;
  CallArgs args = EvalArgs(e, scope);
  line_ = e.line;
  return ApplyFilter(e.name, input, args);
}

Value Evaluator::EvalCall(const Expr& e, const ScopePtr& scope) {
  Value fn = e.a->kind == Expr::Kind::kGetAttr ? GetAttr(Eval(*e.a->a, scope), e.a->name)
                                               : Eval(*e.a, scope);
  CallArgs args = EvalArgs(e, scope);
  line_ = e.line;
  return CallValue(fn, args);
}

Value Evaluator::Eval(const Expr& e, const ScopePtr& scope) {
  DepthGuard guard(*this);
  ChargeSteps(1);
  line_ = e.line;
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName:
      return Lookup(e.name, scope);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(Eval(*a, scope));
      return Value::List(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      auto d = std::make_shared<DictData>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = Eval(*e.args[i], scope);
        if (k.IsList() || k.IsDict()) Fail("unhashable type: '" + TypeName(k) + "'");
        d->Set(k, Eval(*e.args[i + 1], scope));
      }
      return Value::Dict(std::move(d));
    }
    case Expr::Kind::kGetAttr: {
      Value obj = Eval(*e.a, scope);
      line_ = e.line;
      return GetAttr(obj, e.name);
    }
    case Expr::Kind::kGetItem: {
      Value obj = Eval(*e.a, scope);
      Value key = Eval(*e.b, scope);
      line_ = e.line;
      return GetItem(obj, key);
    }
    case Expr::Kind::kSlice: {
      Value obj = Eval(*e.a, scope);
      Value parts[3];
      for (size_t i = 0; i < 3 && i < e.args.size(); ++i) {
        if (e.args[i]) parts[i] = Eval(*e.args[i], scope);
      }
      line_ = e.line;
      return SliceValue(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall:
      return EvalCall(e, scope);
    case Expr::Kind::kFilter:
      return EvalFilter(e, scope, nullptr);
    case Expr::Kind::kTest: {
      Value input = Eval(*e.a, scope);
      CallArgs args = EvalArgs(e, scope);
      line_ = e.line;
      return Value(ApplyTest(e.name, input, args));
    }
    case Expr::Kind::kNot:
      return Value(!Truthy(Eval(*e.a, scope)));
    case Expr::Kind::kNeg:
      return Negate(Eval(*e.a, scope));
    case Expr::Kind::kPos:
      return Positive(Eval(*e.a, scope));
    case Expr::Kind::kBinary: {
      Value a = Eval(*e.a, scope);
      Value b = Eval(*e.b, scope);
      line_ = e.line;
      return BinaryOp(e.name, a, b);
    }
    case Expr::Kind::kCompare: {
      Value left = Eval(*e.a, scope);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = Eval(*e.args[i], scope);
        line_ = e.line;
        if (!CompareOp(e.ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case Expr::Kind::kAnd: {
      Value a = Eval(*e.a, scope);
      if (!Truthy(a)) return a;
      return Eval(*e.b, scope);
    }
    case Expr::Kind::kOr: {
      Value a = Eval(*e.a, scope);
      if (Truthy(a)) return a;
      return Eval(*e.b, scope);
    }
    case Expr::Kind::kCondExpr:
      if (Truthy(Eval(*e.b, scope))) return Eval(*e.a, scope);
      if (e.c) return Eval(*e.c, scope);
      return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  return Value();
}

}  // namespace m3::tmpl
