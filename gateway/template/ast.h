// The parsed template: expression and statement nodes produced by the parser and walked by the
// evaluator. Nodes are plain data; every node keeps its source line for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gateway/template/value.h"

namespace m3::tmpl {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kList,      // args
    kTuple,     // args
    kDict,      // args = key, value, key, value...
    kGetAttr,   // a.name
    kGetItem,   // a[b]
    kSlice,     // a[args0:args1:args2], null parts allowed
    kCall,      // a(args, kwargs)
    kFilter,    // a | name(args, kwargs); a is null inside {% filter %}
    kTest,      // a is name(args, kwargs)
    kNot,       // not a
    kNeg,       // -a
    kPos,       // +a
    kBinary,    // a op b, op in + - * / // % ** ~
    kCompare,   // a ops[0] args[0] ops[1] args[1]...
    kAnd,       // a and b
    kOr,        // a or b
    kCondExpr,  // a if b else c
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // height of the tree under this node, bounded by the parser
  Value literal;
  std::string name;  // name / attribute / filter / test / operator
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // comparison operators of kCompare
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// An assignment target: a name, `ns.attr`, or a tuple of names.
struct Target {
  std::vector<std::string> names;  // one name, or several for tuple unpacking
  std::string attr;                // set for `ns.attr` (names[0] = ns)
  bool is_tuple = false;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kPrint,        // {{ expr }}
    kIf,           // branches (cond, body), else_body
    kFor,          // target in expr [if cond]: body, else_body
    kSet,          // target = expr, or block set when expr is null (body, filter)
    kMacro,        // name(params): body
    kCallBlock,    // {% call(params) expr %}body{% endcall %}
    kFilterBlock,  // {% filter expr %}body{% endfilter %}
    kWith,         // {% with a=b %}body{% endwith %}
    kBreak,
    kContinue,
    kScope,  // body rendered in place ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;    // for-loop filter
  ExprPtr filter;  // block set filter chain / filter block (kFilter with null innermost a)
  Target target;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::string name;
  std::vector<MacroParam> params;
  std::vector<std::pair<Target, ExprPtr>> assignments;  // {% with %}
};

struct Program {
  std::string name;
  Body body;
};

}  // namespace m3::tmpl
