// Walks a parsed Program and renders it: jinja2 scoping (loops and macros open scopes, `if`
// does not), the loop object, macros with defaults/keywords/caller, namespaces, break/continue,
// and jinja2's attribute/item lookup rules. Filters, tests and methods live in their own files
// and call back into the evaluator for nested calls.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "gateway/template/ast.h"
#include "gateway/template/template_limits.h"
#include "gateway/template/value.h"

namespace m3::tmpl {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
};
using ScopePtr = std::shared_ptr<Scope>;

class Evaluator {
 public:
  Evaluator(const Program& program, const nlohmann::ordered_json& context,
            const TemplateLimits& limits = {});

  // Throws m3::Error with "<name>:<line>: " in front of every failure: kTooLarge when a limit
  // was exceeded, kInvalidArgument otherwise.
  std::string Render();

  // Services for filters, tests, methods and builtins.
  Value CallValue(const Value& fn, CallArgs& args);
  Value ApplyFilter(const std::string& name, const Value& input, CallArgs& args);
  bool ApplyTest(const std::string& name, const Value& input, CallArgs& args);
  Value GetAttr(const Value& obj, const std::string& name);
  Value GetItem(const Value& obj, const Value& key);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // Counts one level of evaluation recursion for its lifetime; fails past max_eval_depth or
  // when the thread's stack runs low, whichever comes first.
  class DepthGuard {
   public:
    explicit DepthGuard(Evaluator& ev);
    ~DepthGuard() { --ev_.eval_depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Evaluator& ev_;
  };

  Flow RenderBody(const Body& body, const ScopePtr& scope, std::string& out);
  Flow RenderStmt(const Stmt& s, const ScopePtr& scope, std::string& out);
  void RenderFor(const Stmt& s, const ScopePtr& scope, std::string& out);
  void RenderSet(const Stmt& s, const ScopePtr& scope);
  Value MakeMacro(const Stmt& s, const ScopePtr& scope);
  Value InvokeMacro(const Stmt& s, const ScopePtr& def_scope, CallArgs& args);

  Value Eval(const Expr& e, const ScopePtr& scope);
  Value EvalCall(const Expr& e, const ScopePtr& scope);
  Value EvalFilter(const Expr& e, const ScopePtr& scope, const Value* block_input);
  CallArgs EvalArgs(const Expr& e, const ScopePtr& scope);
  Value Lookup(const std::string& name, const ScopePtr& scope);
  void Assign(const Target& target, const Value& value, const ScopePtr& scope);

  const Program& program_;
  const nlohmann::ordered_json& context_;
  const TemplateLimits limits_;
  DictData globals_;
  int line_ = 0;
  int macro_depth_ = 0;
  int eval_depth_ = 0;
};

}  // namespace m3::tmpl
