// Recursive-descent Jinja2 parser (see parser.h).
#include "gateway/template/parser.h"

#include <initializer_list>

#include "gateway/template/lexer.h"
#include "gateway/template/render_budget.h"
#include "shared/error.h"

namespace m3::tmpl {

namespace {

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name, const TemplateLimits& limits)
      : tokens_(std::move(tokens)), name_(name), limits_(limits) {}

  std::unique_ptr<Program> Run() {
    auto program = std::make_unique<Program>();
    program->name = name_;
    std::string end = ParseBody(program->body, {});
    (void)end;
    return program;
  }

 private:
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Look(size_t k = 1) const { return tokens_[std::min(pos_ + k, tokens_.size() - 1)]; }
  const Token& Next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool IsOp(const char* op) const { return Cur().type == TokenType::kOp && Cur().text == op; }
  bool IsName(const char* n) const { return Cur().type == TokenType::kName && Cur().text == n; }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(const char* n) {
    if (!IsName(n)) return false;
    Next();
    return true;
  }

  static std::string Describe(const Token& t) {
    switch (t.type) {
      case TokenType::kEof:
        return "end of template";
      case TokenType::kBlockEnd:
        return "end of statement block";
      case TokenType::kVarEnd:
        return "end of print statement";
      case TokenType::kBlockBegin:
        return "begin of statement block";
      case TokenType::kVarBegin:
        return "begin of print statement";
      case TokenType::kData:
        return "template data";
      case TokenType::kString:
        return "string";
      default:
        return "'" + t.text + "'";
    }
  }

  [[noreturn]] void FailAt(const Token& t, const std::string& message) const {
    ThrowSyntaxError(name_, t.line, message);
  }
  [[noreturn]] void Unexpected(const std::string& expected) const {
    FailAt(Cur(), "expected " + expected + ", got " + Describe(Cur()));
  }
  void ExpectOp(const char* op) {
    if (!SkipOp(op)) Unexpected(std::string("'") + op + "'");
  }
  std::string ExpectName() {
    if (Cur().type != TokenType::kName) Unexpected("name");
    return Next().text;
  }
  void ExpectBlockEnd() {
    if (Cur().type != TokenType::kBlockEnd) Unexpected("end of statement block");
    Next();
  }

  // Counts one level of parser recursion (a nested block, parenthesis, list, unary operator...)
  // for its lifetime.
  class NestGuard {
   public:
    explicit NestGuard(Parser& p) : p_(p) {
      if (++p_.nesting_ > p_.limits_.max_nesting) {
        --p_.nesting_;
        p_.TooDeep(p_.Cur());
      }
      if (StackNearlyExhausted()) {
        --p_.nesting_;
        throw Error(ErrorCode::kTooLarge, p_.name_ + ":" + std::to_string(p_.Cur().line) +
                                              ": template nested too deep for the thread's stack");
      }
    }
    ~NestGuard() { --p_.nesting_; }
    NestGuard(const NestGuard&) = delete;
    NestGuard& operator=(const NestGuard&) = delete;

   private:
    Parser& p_;
  };

  [[noreturn]] void TooDeep(const Token& t) const {
    throw Error(ErrorCode::kTooLarge, name_ + ":" + std::to_string(t.line) +
                                          ": template nesting deeper than " +
                                          std::to_string(limits_.max_nesting));
  }

  // Records the height of a finished node from its children. Chains such as a + b + c or
  // x|f|g|h are built in a loop without recursion, so the tree height is checked here: the
  // evaluator and the destructors walk the tree recursively.
  ExprPtr Seal(ExprPtr e) {
    int d = 0;
    auto take = [&](const ExprPtr& c) {
      if (c) d = std::max(d, c->depth);
    };
    take(e->a);
    take(e->b);
    take(e->c);
    for (const auto& c : e->args) take(c);
    for (const auto& kv : e->kwargs) take(kv.second);
    e->depth = d + 1;
    if (e->depth > limits_.max_nesting) TooDeep(Cur());
    return e;
  }

  ExprPtr Make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // Parses statements until a block tag whose name is in `ends`; consumes `{%` and that name
  // and returns it ("" at the end of the template when `ends` is empty).
  std::string ParseBody(Body& body, std::initializer_list<const char*> ends) {
    while (true) {
      const Token& t = Cur();
      if (t.type == TokenType::kEof) {
        if (ends.size() == 0) return "";
        std::string want;
        for (const char* e : ends) want += std::string(want.empty() ? "" : " or ") + "'" + e + "'";
        FailAt(t, "Unexpected end of template. Jinja was looking for the following tags: " + want);
      }
      if (t.type == TokenType::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        Next();
        continue;
      }
      if (t.type == TokenType::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kPrint;
        s->line = t.line;
        Next();
        s->expr = ParseTuple(true, false, {});
        if (Cur().type != TokenType::kVarEnd) Unexpected("end of print statement");
        Next();
        body.push_back(std::move(s));
        continue;
      }
      if (t.type != TokenType::kBlockBegin) Unexpected("template data");
      const Token& tag = Look();
      if (tag.type != TokenType::kName) FailAt(tag, "tag name expected");
      for (const char* e : ends) {
        if (tag.text == e) {
          Next();
          Next();
          return tag.text;
        }
      }
      Next();
      body.push_back(ParseStatement());
    }
  }

  StmtPtr NewStmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  StmtPtr ParseStatement() {
    NestGuard guard(*this);
    const Token& tag = Cur();
    const std::string word = tag.text;
    const int line = tag.line;
    Next();
    if (word == "for") return ParseFor(line);
    if (word == "if") return ParseIf(line);
    if (word == "set") return ParseSet(line);
    if (word == "macro") return ParseMacro(line);
    if (word == "call") return ParseCallBlock(line);
    if (word == "filter") return ParseFilterBlock(line);
    if (word == "with") return ParseWith(line);
    if (word == "break" || word == "continue") {
      auto s = NewStmt(word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
      ExpectBlockEnd();
      return s;
    }
    if (word == "generation") {
      auto s = NewStmt(Stmt::Kind::kScope, line);
      ExpectBlockEnd();
      ParseBody(s->body, {"endgeneration"});
      ExpectBlockEnd();
      return s;
    }
    if (word == "extends" || word == "include" || word == "import" || word == "from" ||
        word == "block" || word == "autoescape" || word == "do") {
      FailAt(tag, "'{% " + word + " %}' is not supported by this template engine");
    }
    FailAt(tag, "Encountered unknown tag '" + word + "'.");
  }

  Target ParseTarget(bool with_namespace) {
    Target target;
    if (with_namespace && Cur().type == TokenType::kName && Look().type == TokenType::kOp &&
        Look().text == ".") {
      target.names.push_back(Next().text);
      Next();
      target.attr = ExpectName();
      return target;
    }
    bool parens = SkipOp("(");
    while (true) {
      target.names.push_back(ExpectName());
      if (!SkipOp(",")) break;
      target.is_tuple = true;
      if (Cur().type != TokenType::kName) break;
    }
    if (parens) {
      target.is_tuple = true;
      ExpectOp(")");
    }
    return target;
  }

  StmtPtr ParseFor(int line) {
    auto s = NewStmt(Stmt::Kind::kFor, line);
    s->target = ParseTarget(false);
    if (!SkipName("in")) Unexpected("'in'");
    s->expr = ParseTuple(false, false, {"recursive"});
    if (SkipName("if")) s->cond = ParseExpression(true);
    if (IsName("recursive"))
      FailAt(Cur(), "recursive loops are not supported by this template engine");
    ExpectBlockEnd();
    std::string end = ParseBody(s->body, {"endfor", "else"});
    if (end == "else") {
      ExpectBlockEnd();
      ParseBody(s->else_body, {"endfor"});
    }
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseIf(int line) {
    auto s = NewStmt(Stmt::Kind::kIf, line);
    ExprPtr cond = ParseTuple(false, false, {});
    while (true) {
      ExpectBlockEnd();
      Body body;
      std::string end = ParseBody(body, {"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (end == "elif") {
        cond = ParseTuple(false, false, {});
        continue;
      }
      if (end == "else") {
        ExpectBlockEnd();
        ParseBody(s->else_body, {"endif"});
      }
      ExpectBlockEnd();
      return s;
    }
  }

  StmtPtr ParseSet(int line) {
    auto s = NewStmt(Stmt::Kind::kSet, line);
    s->target = ParseTarget(true);
    if (SkipOp("=")) {
      s->expr = ParseTuple(true, false, {});
      ExpectBlockEnd();
      return s;
    }
    if (IsOp("|")) s->filter = ParseFilterChain(nullptr);
    ExpectBlockEnd();
    ParseBody(s->body, {"endset"});
    ExpectBlockEnd();
    return s;
  }

  void ParseParams(std::vector<MacroParam>& params) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!params.empty()) ExpectOp(",");
      if (IsOp(")")) break;
      MacroParam p;
      p.name = ExpectName();
      if (SkipOp("=")) p.default_value = ParseExpression(true);
      params.push_back(std::move(p));
    }
    ExpectOp(")");
  }

  StmtPtr ParseMacro(int line) {
    auto s = NewStmt(Stmt::Kind::kMacro, line);
    s->name = ExpectName();
    ParseParams(s->params);
    ExpectBlockEnd();
    ParseBody(s->body, {"endmacro"});
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseCallBlock(int line) {
    auto s = NewStmt(Stmt::Kind::kCallBlock, line);
    if (IsOp("(")) ParseParams(s->params);
    s->expr = ParseExpression(true);
    if (s->expr->kind != Expr::Kind::kCall) FailAt(Cur(), "expected call");
    ExpectBlockEnd();
    ParseBody(s->body, {"endcall"});
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseFilterBlock(int line) {
    auto s = NewStmt(Stmt::Kind::kFilterBlock, line);
    s->filter = ParseFilterChain(nullptr, /*leading_pipe=*/false);
    ExpectBlockEnd();
    ParseBody(s->body, {"endfilter"});
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseWith(int line) {
    auto s = NewStmt(Stmt::Kind::kWith, line);
    while (Cur().type != TokenType::kBlockEnd) {
      if (!s->assignments.empty()) ExpectOp(",");
      Target t = ParseTarget(false);
      ExpectOp("=");
      s->assignments.emplace_back(std::move(t), ParseExpression(true));
    }
    ExpectBlockEnd();
    ParseBody(s->body, {"endwith"});
    ExpectBlockEnd();
    return s;
  }

  // ---- expressions ----

  bool IsTupleEnd(std::initializer_list<const char*> extra) const {
    const Token& t = Cur();
    if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd ||
        t.type == TokenType::kEof || (t.type == TokenType::kOp && t.text == ")")) {
      return true;
    }
    for (const char* e : extra) {
      if (t.type == TokenType::kName && t.text == e) return true;
    }
    return false;
  }

  ExprPtr ParseTuple(bool with_condexpr, bool explicit_parens,
                     std::initializer_list<const char*> extra) {
    int line = Cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) ExpectOp(",");
      if (IsTupleEnd(extra)) break;
      args.push_back(with_condexpr ? ParseExpression(true) : ParseOr());
      if (IsOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (args.size() == 1) return std::move(args[0]);
      if (!explicit_parens) FailAt(Cur(), "Expected an expression, got " + Describe(Cur()));
    }
    auto e = Make(Expr::Kind::kTuple, line);
    e->args = std::move(args);
    return Seal(std::move(e));
  }

  ExprPtr ParseExpression(bool with_condexpr) {
    NestGuard guard(*this);
    if (!with_condexpr) return ParseOr();
    int line = Cur().line;
    ExprPtr expr = ParseOr();
    while (SkipName("if")) {
      auto e = Make(Expr::Kind::kCondExpr, line);
      e->b = ParseOr();
      if (SkipName("else")) e->c = ParseExpression(true);
      e->a = std::move(expr);
      expr = Seal(std::move(e));
    }
    return expr;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsName("or")) {
      auto e = Make(Expr::Kind::kOr, Next().line);
      e->a = std::move(left);
      e->b = ParseAnd();
      left = Seal(std::move(e));
    }
    return left;
  }

  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsName("and")) {
      auto e = Make(Expr::Kind::kAnd, Next().line);
      e->a = std::move(left);
      e->b = ParseNot();
      left = Seal(std::move(e));
    }
    return left;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      NestGuard guard(*this);
      auto e = Make(Expr::Kind::kNot, Next().line);
      e->a = ParseNot();
      return Seal(std::move(e));
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    int line = Cur().line;
    ExprPtr expr = ParseMath1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      const Token& t = Cur();
      if (t.type == TokenType::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                       t.text == "<=" || t.text == ">" || t.text == ">=")) {
        ops.push_back(Next().text);
      } else if (IsName("in")) {
        Next();
        ops.push_back("in");
      } else if (IsName("not") && Look().type == TokenType::kName && Look().text == "in") {
        Next();
        Next();
        ops.push_back("notin");
      } else {
        break;
      }
      operands.push_back(ParseMath1());
    }
    if (ops.empty()) return expr;
    auto e = Make(Expr::Kind::kCompare, line);
    e->a = std::move(expr);
    e->ops = std::move(ops);
    e->args = std::move(operands);
    return Seal(std::move(e));
  }

  ExprPtr Binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
    auto e = Make(Expr::Kind::kBinary, line);
    e->name = op;
    e->a = std::move(left);
    e->b = std::move(right);
    return Seal(std::move(e));
  }

  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const Token& t = Next();
      std::string op = t.text;
      left = Binary(op, std::move(left), ParseConcat(), t.line);
    }
    return left;
  }

  ExprPtr ParseConcat() {
    ExprPtr left = ParseMath2();
    while (IsOp("~")) {
      int line = Next().line;
      left = Binary("~", std::move(left), ParseMath2(), line);
    }
    return left;
  }

  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& t = Next();
      std::string op = t.text;
      left = Binary(op, std::move(left), ParsePow(), t.line);
    }
    return left;
  }

  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (IsOp("**")) {
      int line = Next().line;
      left = Binary("**", std::move(left), ParseUnary(true), line);
    }
    return left;
  }

  ExprPtr ParseUnary(bool with_filter) {
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      NestGuard guard(*this);
      bool neg = Cur().text == "-";
      node = Make(neg ? Expr::Kind::kNeg : Expr::Kind::kPos, Next().line);
      node->a = ParseUnary(false);
      node = Seal(std::move(node));
    } else {
      node = ParsePrimary();
    }
    node = ParsePostfix(std::move(node));
    if (with_filter) node = ParseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr ParsePrimary() {
    const Token& t = Cur();
    int line = t.line;
    if (t.type == TokenType::kName) {
      auto e = Make(Expr::Kind::kLiteral, line);
      if (t.text == "true" || t.text == "True") {
        e->literal = Value(true);
      } else if (t.text == "false" || t.text == "False") {
        e->literal = Value(false);
      } else if (t.text == "none" || t.text == "None") {
        e->literal = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      Next();
      return e;
    }
    if (t.type == TokenType::kString) {
      std::string s;
      while (Cur().type == TokenType::kString) s += Next().text;
      auto e = Make(Expr::Kind::kLiteral, line);
      e->literal = Value(std::move(s));
      return e;
    }
    if (t.type == TokenType::kInt || t.type == TokenType::kFloat) {
      auto e = Make(Expr::Kind::kLiteral, line);
      e->literal = t.type == TokenType::kInt ? Value(t.int_value) : Value(t.float_value);
      Next();
      return e;
    }
    if (t.type == TokenType::kOp && t.text == "(") {
      Next();
      ExprPtr e = ParseTuple(true, true, {});
      ExpectOp(")");
      return e;
    }
    if (t.type == TokenType::kOp && t.text == "[") {
      Next();
      auto e = Make(Expr::Kind::kList, line);
      while (!IsOp("]")) {
        if (!e->args.empty()) ExpectOp(",");
        if (IsOp("]")) break;
        e->args.push_back(ParseExpression(true));
      }
      ExpectOp("]");
      return Seal(std::move(e));
    }
    if (t.type == TokenType::kOp && t.text == "{") {
      Next();
      auto e = Make(Expr::Kind::kDict, line);
      while (!IsOp("}")) {
        if (!e->args.empty()) ExpectOp(",");
        if (IsOp("}")) break;
        e->args.push_back(ParseExpression(true));
        ExpectOp(":");
        e->args.push_back(ParseExpression(true));
      }
      ExpectOp("}");
      return Seal(std::move(e));
    }
    FailAt(t, "unexpected " + Describe(t));
  }

  ExprPtr ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(".")) {
        int line = Next().line;
        const Token& attr = Cur();
        if (attr.type == TokenType::kName) {
          auto e = Make(Expr::Kind::kGetAttr, line);
          e->a = std::move(node);
          e->name = Next().text;
          node = Seal(std::move(e));
        } else if (attr.type == TokenType::kInt) {
          auto e = Make(Expr::Kind::kGetItem, line);
          e->a = std::move(node);
          e->b = Make(Expr::Kind::kLiteral, line);
          e->b->literal = Value(Next().int_value);
          node = Seal(std::move(e));
        } else {
          FailAt(attr, "expected name or number");
        }
      } else if (IsOp("[")) {
        node = ParseSubscript(std::move(node));
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr node) {
    int line = Next().line;      // [
    std::vector<ExprPtr> parts;  // for slices: start, stop, step
    bool is_slice = false;
    std::vector<ExprPtr> items;
    while (!IsOp("]")) {
      if (!items.empty() || is_slice) ExpectOp(",");
      // one subscribed item: expr, or a slice
      ExprPtr first;
      if (!IsOp(":")) first = ParseExpression(true);
      if (IsOp(":")) {
        if (!items.empty()) FailAt(Cur(), "tuple slices are not supported");
        is_slice = true;
        Next();
        parts.push_back(std::move(first));
        parts.push_back(IsOp("]") || IsOp(",") || IsOp(":") ? nullptr : ParseExpression(true));
        if (SkipOp(":")) {
          parts.push_back(IsOp("]") || IsOp(",") ? nullptr : ParseExpression(true));
        } else {
          parts.push_back(nullptr);
        }
        break;
      }
      items.push_back(std::move(first));
    }
    ExpectOp("]");
    if (is_slice) {
      auto e = Make(Expr::Kind::kSlice, line);
      e->a = std::move(node);
      e->args = std::move(parts);
      return Seal(std::move(e));
    }
    if (items.empty()) FailAt(Cur(), "expected subscript expression");
    auto e = Make(Expr::Kind::kGetItem, line);
    e->a = std::move(node);
    if (items.size() == 1) {
      e->b = std::move(items[0]);
    } else {
      e->b = Make(Expr::Kind::kTuple, line);
      e->b->args = std::move(items);
      e->b = Seal(std::move(e->b));
    }
    return Seal(std::move(e));
  }

  void ParseCallArgs(Expr& call) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!call.args.empty() || !call.kwargs.empty()) {
        ExpectOp(",");
        if (IsOp(")")) break;
      }
      if (IsOp("*") || IsOp("**")) FailAt(Cur(), "*args and **kwargs in calls are not supported");
      if (Cur().type == TokenType::kName && Look().type == TokenType::kOp && Look().text == "=") {
        std::string key = Next().text;
        Next();
        call.kwargs.emplace_back(key, ParseExpression(true));
      } else {
        if (!call.kwargs.empty()) FailAt(Cur(), "invalid syntax for function call expression");
        call.args.push_back(ParseExpression(true));
      }
    }
    ExpectOp(")");
  }

  ExprPtr ParseCall(ExprPtr node) {
    auto e = Make(Expr::Kind::kCall, Cur().line);
    e->a = std::move(node);
    ParseCallArgs(*e);
    return Seal(std::move(e));
  }

  std::string ParseDottedName() {
    std::string name = ExpectName();
    while (IsOp(".")) {
      Next();
      name += '.';
      name += ExpectName();
    }
    return name;
  }

  // `| f(args) | g ...` applied to `node` (null for {% filter %} and block set).
  ExprPtr ParseFilterChain(ExprPtr node, bool leading_pipe = true) {
    bool first = true;
    while ((first && !leading_pipe) || IsOp("|")) {
      if (!(first && !leading_pipe)) Next();
      first = false;
      auto e = Make(Expr::Kind::kFilter, Cur().line);
      e->name = ParseDottedName();
      e->a = std::move(node);
      if (IsOp("(")) ParseCallArgs(*e);
      node = Seal(std::move(e));
    }
    return node;
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        node = ParseFilterChain(std::move(node));
      } else if (IsName("is")) {
        node = ParseTest(std::move(node));
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseTest(ExprPtr node) {
    int line = Next().line;  // is
    bool negated = SkipName("not");
    auto e = Make(Expr::Kind::kTest, line);
    e->name = ParseDottedName();
    e->a = std::move(node);
    const Token& t = Cur();
    if (IsOp("(")) {
      ParseCallArgs(*e);
    } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
                t.type == TokenType::kInt || t.type == TokenType::kFloat ||
                (t.type == TokenType::kOp && (t.text == "[" || t.text == "{"))) &&
               !(t.type == TokenType::kName &&
                 (t.text == "else" || t.text == "or" || t.text == "and"))) {
      if (IsName("is")) FailAt(t, "You cannot chain multiple tests with is");
      NestGuard guard(*this);
      e->args.push_back(ParsePostfix(ParsePrimary()));
    }
    e = Seal(std::move(e));
    if (!negated) return e;
    auto n = Make(Expr::Kind::kNot, line);
    n->a = std::move(e);
    return Seal(std::move(n));
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  const std::string& name_;
  const TemplateLimits& limits_;
  int nesting_ = 0;
};

}  // namespace

std::unique_ptr<Program> ParseProgram(std::string_view source, const std::string& name,
                                      const TemplateLimits& limits) {
  if (static_cast<int64_t>(source.size()) > limits.max_source_bytes) {
    throw Error(ErrorCode::kTooLarge, name + ": template source of " +
                                          std::to_string(source.size()) +
                                          " bytes exceeds the limit of " +
                                          std::to_string(limits.max_source_bytes) + " bytes");
  }
  return Parser(Tokenize(source, name), name, limits).Run();
}

}  // namespace m3::tmpl
