// Deterministic fuzzing of the template lexer, parser and evaluator. Each case is either a real
// chat template (tests/data/chat_templates) with a few mutations (byte edits, Jinja tokens
// spliced in, ranges repeated to nest deeply, pieces of another template), or a template made
// by a small random grammar (expressions, filters, methods, loops, macros, namespaces), rendered
// against one of the test conversations, sometimes with a mutated request. Everything is drawn
// from a std::mt19937_64 seeded by the case index, so any failure replays exactly.
//
// Every case must parse and render, or throw m3::Error with kInvalidArgument or kTooLarge; any
// other exception is a bug, and a crash or a sanitizer report fails the run. Cases render under
// small limits so each stays fast; the limits are also drawn per case, so they are exercised at
// many settings.
//
// M3_FUZZ_ITERATIONS sets the number of cases (default 3000, for CI); M3_FUZZ_FIRST the first
// case index; M3_FUZZ_ONLY=N runs case N alone and prints its template; M3_FUZZ_PROGRESS=K
// prints a line every K cases (for long runs under ASan/UBSan); M3_FUZZ_MUTATE_PERCENT (default
// 50) the share of cases mutated from real templates rather than generated.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gateway/template/chat_template.h"
#include "shared/error.h"
#include "tests/test_util.h"

namespace {

using m3::tmpl::ChatTemplate;
using m3::tmpl::TemplateLimits;
using Json = nlohmann::ordered_json;
using Rng = std::mt19937_64;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

struct Corpus {
  std::vector<std::string> templates;
  std::vector<Json> contexts;
};

const Corpus& LoadCorpus() {
  static const Corpus corpus = [] {
    Corpus c;
    std::vector<std::filesystem::path> paths;
    for (const auto& e :
         std::filesystem::directory_iterator(m3::test::DataPath("chat_templates"))) {
      if (e.path().extension() == ".jinja") paths.push_back(e.path());
    }
    std::sort(paths.begin(), paths.end());  // directory order is not stable
    for (const auto& p : paths) c.templates.push_back(m3::test::ReadFile(p.string()));
    const Json conversations =
        Json::parse(m3::test::ReadFile(m3::test::DataPath("chat_templates/conversations.json")));
    for (const auto& conv : conversations) {
      Json ctx = conv["request"];
      if (!ctx.contains("tools")) ctx["tools"] = nullptr;
      if (!ctx.contains("add_generation_prompt")) ctx["add_generation_prompt"] = false;
      c.contexts.push_back(std::move(ctx));
    }
    return c;
  }();
  return corpus;
}

size_t Pick(Rng& rng, size_t n) {
  return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
}

bool Chance(Rng& rng, int percent) {
  return static_cast<int>(Pick(rng, 100)) < percent;
}

const std::vector<std::string>& Tokens() {
  static const std::vector<std::string> tokens = {"{{",
                                                  "}}",
                                                  "{%",
                                                  "%}",
                                                  "{#",
                                                  "#}",
                                                  "{%-",
                                                  "-%}",
                                                  "{{-",
                                                  "-}}",
                                                  "(",
                                                  ")",
                                                  "[",
                                                  "]",
                                                  "{",
                                                  "}",
                                                  ",",
                                                  ":",
                                                  ".",
                                                  "|",
                                                  "~",
                                                  "+",
                                                  "-",
                                                  "*",
                                                  "/",
                                                  "//",
                                                  "%",
                                                  "**",
                                                  "==",
                                                  "!=",
                                                  "<",
                                                  ">=",
                                                  " and ",
                                                  " or ",
                                                  " not ",
                                                  " in ",
                                                  " is ",
                                                  " if ",
                                                  " else ",
                                                  "'",
                                                  "\"",
                                                  "\\",
                                                  "\n",
                                                  " ",
                                                  "0",
                                                  "1",
                                                  "-1",
                                                  "10**6",
                                                  "9223372036854775807",
                                                  "1e308",
                                                  "0.5",
                                                  "none",
                                                  "true",
                                                  "x",
                                                  "loop",
                                                  "loop.index",
                                                  "loop.cycle(1,2)",
                                                  "ns",
                                                  "ns.x",
                                                  "messages",
                                                  "messages[0]",
                                                  "message.content",
                                                  "tools",
                                                  "range(",
                                                  "namespace(",
                                                  "dict(",
                                                  "joiner()",
                                                  "caller()",
                                                  "raise_exception('r')",
                                                  "strftime_now('%Y')",
                                                  "|tojson",
                                                  "|tojson(indent=2)",
                                                  "|length",
                                                  "|join(', ')",
                                                  "|map('upper')",
                                                  "|selectattr('role')",
                                                  "|sort",
                                                  "|unique",
                                                  "|list",
                                                  "|string",
                                                  "|trim",
                                                  "|int",
                                                  "|float",
                                                  "|first",
                                                  "|last",
                                                  "|reverse",
                                                  "|default('d')",
                                                  "|indent(4)",
                                                  "|center(9)",
                                                  "|batch(2)",
                                                  "|dictsort",
                                                  "|items",
                                                  "|format(1)",
                                                  "|e",
                                                  ".split()",
                                                  ".strip()",
                                                  ".startswith('a')",
                                                  ".replace('a','bb')",
                                                  ".format(1)",
                                                  ".ljust(5)",
                                                  ".zfill(4)",
                                                  ".splitlines()",
                                                  ".get('a')",
                                                  ".items()",
                                                  "[::-1]",
                                                  "[1:]",
                                                  "{% for x in range(3) %}",
                                                  "{% endfor %}",
                                                  "{% if x %}",
                                                  "{% elif y %}",
                                                  "{% else %}",
                                                  "{% endif %}",
                                                  "{% set ns = namespace(x=0) %}",
                                                  "{% set ns.x = ns.x + 1 %}",
                                                  "{% set y = x %}",
                                                  "{% set z %}",
                                                  "{% endset %}",
                                                  "{% macro m(a, b=1) %}",
                                                  "{% endmacro %}",
                                                  "{{ m(1) }}",
                                                  "{% call m(1) %}",
                                                  "{% endcall %}",
                                                  "{% filter upper %}",
                                                  "{% endfilter %}",
                                                  "{% break %}",
                                                  "{% continue %}",
                                                  "{% raw %}",
                                                  "{% endraw %}",
                                                  "{% generation %}",
                                                  "{% endgeneration %}",
                                                  "{% with a = 1 %}",
                                                  "{% endwith %}",
                                                  "\xff",
                                                  "\xc3\xa9",
                                                  "\xe2\x80",
                                                  "\xf0\x9f\x98\x80",
                                                  std::string(1, '\0')};
  return tokens;
}

// One random edit of `s`.
void Mutate(Rng& rng, std::string& s, const Corpus& corpus) {
  const size_t n = s.size();
  switch (Pick(rng, 8)) {
    case 0: {  // delete a range
      if (n == 0) break;
      size_t at = Pick(rng, n);
      s.erase(at, 1 + Pick(rng, std::min<size_t>(64, n - at)));
      break;
    }
    case 1:
    case 2: {  // insert a Jinja token
      const auto& t = Tokens()[Pick(rng, Tokens().size())];
      s.insert(Pick(rng, n + 1), t);
      break;
    }
    case 3: {  // overwrite a byte
      if (n == 0) break;
      s[Pick(rng, n)] = static_cast<char>(Pick(rng, 256));
      break;
    }
    case 4: {  // duplicate a range in place
      if (n == 0) break;
      size_t at = Pick(rng, n);
      size_t len = 1 + Pick(rng, std::min<size_t>(200, n - at));
      s.insert(at, s.substr(at, len));
      break;
    }
    case 5: {  // repeat an opening construct many times: deep nesting
      static const std::vector<std::string> openers = {
          "(", "[", "{'a':", "-", "not ", "{% if x %}", "{% for a in b %}", "x|e|", "a.b.", "1+"};
      const std::string& o = openers[Pick(rng, openers.size())];
      std::string rep;
      const size_t count = 1 + Pick(rng, Chance(rng, 20) ? 3000 : 300);
      for (size_t i = 0; i < count; ++i) rep += o;
      s.insert(Pick(rng, n + 1), "{{ " + rep + " }}");
      break;
    }
    case 6: {  // splice a piece of another template
      const std::string& other = corpus.templates[Pick(rng, corpus.templates.size())];
      if (other.empty()) break;
      size_t from = Pick(rng, other.size());
      s.insert(Pick(rng, n + 1), other.substr(from, 1 + Pick(rng, 300)));
      break;
    }
    default: {  // swap two ranges' contents (cut and reinsert)
      if (n < 2) break;
      size_t at = Pick(rng, n);
      size_t len = 1 + Pick(rng, std::min<size_t>(100, n - at));
      std::string piece = s.substr(at, len);
      s.erase(at, len);
      s.insert(Pick(rng, s.size() + 1), piece);
      break;
    }
  }
}

// A small random grammar: expressions over literals, names, operators, filters, tests, methods
// and builtins; statements with loops, conditions, sets, macros and namespaces.
class Generator {
 public:
  explicit Generator(Rng& rng) : rng_(rng) {}

  std::string Template() {
    std::string out = "{% set x = [3, 'b'] %}{% set y = 'a b' %}{% set ns = namespace(x=2) %}";
    const size_t n = 1 + Pick(rng_, 6);
    for (size_t i = 0; i < n; ++i) out += Statement(0);
    return out;
  }

 private:
  std::string Literal() {
    switch (Pick(rng_, 8)) {
      case 0:
        return std::to_string(static_cast<int64_t>(rng_() % 2000) - 1000);
      case 1:
        return Chance(rng_, 50) ? "1.5" : "-0.0";
      case 2:
        return "'" + std::string(Pick(rng_, 4), "ab c"[Pick(rng_, 4)]) + "'";
      case 3:
        return Chance(rng_, 50) ? "true" : "none";
      case 4:
        return "[1, 'a', [2]]";
      case 5:
        return "{'a': 1, 'b': [1, 2]}";
      case 6:
        return "(1, 2)";
      default:
        return Chance(rng_, 50) ? "10**6" : "''";
    }
  }

  std::string Name() {
    static const std::vector<std::string> names = {"x",
                                                   "y",
                                                   "ns",
                                                   "ns.x",
                                                   "messages",
                                                   "messages[0]",
                                                   "messages[-1].content",
                                                   "tools",
                                                   "add_generation_prompt",
                                                   "bos_token",
                                                   "loop.index",
                                                   "m",
                                                   "undefined_thing"};
    return names[Pick(rng_, names.size())];
  }

  std::string Expr(int depth) {
    if (depth > 5 || Chance(rng_, 25)) return Chance(rng_, 50) ? Literal() : Name();
    static const std::vector<std::string> binops = {" + ",  " - ",   " * ",  " / ",     " // ",
                                                    " % ",  " ** ",  " ~ ",  " == ",    " < ",
                                                    " in ", " and ", " or ", " not in "};
    static const std::vector<std::string> filters = {"length",
                                                     "tojson",
                                                     "join(', ')",
                                                     "upper",
                                                     "list",
                                                     "string",
                                                     "int",
                                                     "float",
                                                     "sort",
                                                     "unique",
                                                     "first",
                                                     "last",
                                                     "reverse",
                                                     "trim",
                                                     "map('string')",
                                                     "selectattr('role')",
                                                     "items",
                                                     "dictsort",
                                                     "batch(2, fill_with=0)",
                                                     "indent(2, true)",
                                                     "center(12)",
                                                     "default('z')",
                                                     "sum",
                                                     "min",
                                                     "max",
                                                     "abs",
                                                     "round(1)",
                                                     "wordcount",
                                                     "title",
                                                     "escape",
                                                     "replace('a', 'xy')",
                                                     "format(1, 2)",
                                                     "attr('a')",
                                                     "tojson(indent=1, sort_keys=true)",
                                                     "reject('none')",
                                                     "select('string')",
                                                     "map(attribute='role')"};
    static const std::vector<std::string> methods = {
        "split()",           "split(',')",   "strip()",        "upper()",    "startswith('a')",
        "replace('a', 'b')", "format(1)",    "find('a')",      "count('a')", "ljust(6, '-')",
        "zfill(5)",          "splitlines()", "get('a')",       "items()",    "keys()",
        "values()",          "index(1)",     "partition(' ')", "title()"};
    static const std::vector<std::string> tests = {
        "defined",  "none", "string",         "number",     "mapping",  "iterable",
        "sequence", "odd",  "divisibleby(3)", "in([1, 2])", "sameas(x)"};
    switch (Pick(rng_, 10)) {
      case 0:
      case 1:
        return "(" + Expr(depth + 1) + binops[Pick(rng_, binops.size())] + Expr(depth + 1) + ")";
      case 2:
        return "(" + Expr(depth + 1) + " | " + filters[Pick(rng_, filters.size())] + ")";
      case 3:
        return "(" + Expr(depth + 1) + ")." + methods[Pick(rng_, methods.size())];
      case 4:
        return "(" + Expr(depth + 1) + " is " + (Chance(rng_, 30) ? "not " : "") +
               tests[Pick(rng_, tests.size())] + ")";
      case 5:
        return "[" + Expr(depth + 1) + ", " + Expr(depth + 1) + "]";
      case 6:
        return "(" + Expr(depth + 1) + " if " + Expr(depth + 1) + " else " + Expr(depth + 1) + ")";
      case 7:
        return "range(" + std::to_string(Pick(rng_, 6)) + ")";
      case 8:
        return "(" + Expr(depth + 1) + ")[" + (Chance(rng_, 50) ? Expr(depth + 1) : "1:") + "]";
      default:
        return "(not " + Expr(depth + 1) + ")";
    }
  }

  std::string Statement(int depth) {
    if (depth > 4) return "{{ " + Expr(3) + " }}";
    switch (Pick(rng_, 9)) {
      case 0:
      case 1:
        return "{{ " + Expr(0) + " }}";
      case 2:
        return "{% for x in " + Expr(2) + " %}" + Statement(depth + 1) +
               (Chance(rng_, 20) ? "{% break %}" : "") + "{% else %}e{% endfor %}";
      case 3:
        return "{% if " + Expr(1) + " %}" + Statement(depth + 1) + "{% elif " + Expr(2) + " %}" +
               Statement(depth + 1) + "{% endif %}";
      case 4:
        return "{% set ns = namespace(x=" + Expr(3) + ") %}{% set ns.x = " + Expr(2) +
               " %}{{ ns.x }}";
      case 5:
        return "{% set y = " + Expr(1) + " %}{{ y }}";
      case 6:
        return "{% macro m(a, b=2) %}" + Statement(depth + 1) + "{{ a ~ b ~ varargs }}" +
               (Chance(rng_, 30) ? "{{ m(a) if a is number and a > 0 else '' }}" : "") +
               "{% endmacro %}{{ m(" + Expr(3) + ") }}";
      case 7:
        return "{%- filter upper -%}" + Statement(depth + 1) + "{%- endfilter %}\n";
      default:
        return "text\n  {#- comment -#} " + std::string(Pick(rng_, 3), ' ');
    }
  }

  Rng& rng_;
};

// The request, sometimes with a value replaced by something odd or deeply nested.
Json MutatedContext(Rng& rng, Json ctx) {
  if (!Chance(rng, 15)) return ctx;
  Json odd;
  switch (Pick(rng, 5)) {
    case 0: {
      odd = Json::array();
      const size_t depth = Pick(rng, 600);
      for (size_t i = 0; i < depth; ++i) odd = Json::array({std::move(odd)});
      break;
    }
    case 1:
      odd = std::string(Pick(rng, 5000), 'q');
      break;
    case 2:
      odd = Json::array({1, "two", nullptr, Json::object(), 3.5});
      break;
    case 3:
      odd = -9223372036854775807LL - 1;
      break;
    default:
      odd = nullptr;
      break;
  }
  if (Chance(rng, 50) && ctx["messages"].is_array() && !ctx["messages"].empty()) {
    ctx["messages"][0]["content"] = std::move(odd);
  } else {
    ctx[Chance(rng, 50) ? "messages" : "tools"] = std::move(odd);
  }
  return ctx;
}

TemplateLimits CaseLimits(Rng& rng) {
  TemplateLimits l;
  l.max_nesting = Chance(rng, 50) ? 64 : 256;
  l.max_eval_depth = Chance(rng, 50) ? 300 : 1024;
  l.max_macro_depth = 50;
  l.max_output_bytes = int64_t{1} << (10 + Pick(rng, 11));
  l.max_string_bytes = int64_t{1} << (10 + Pick(rng, 11));
  l.max_list_items = int64_t{1} << (4 + Pick(rng, 12));
  l.max_loop_iterations = int64_t{1} << (4 + Pick(rng, 12));
  l.max_steps = int64_t{1} << (12 + Pick(rng, 7));
  return l;
}

struct CaseResult {
  bool bug = false;
  int outcome = 0;  // 0 rendered, 1 kInvalidArgument, 2 kTooLarge
  std::string what;
};

CaseResult RunCase(int64_t index, bool print) {
  const Corpus& corpus = LoadCorpus();
  Rng rng(0x7e3a11c0ffeeULL ^ (static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ULL));
  std::string source;
  static const int64_t mutate_percent = EnvInt("M3_FUZZ_MUTATE_PERCENT", 50);
  if (Chance(rng, static_cast<int>(mutate_percent))) {
    source = corpus.templates[Pick(rng, corpus.templates.size())];
    const size_t edits = 1 + Pick(rng, 4);
    for (size_t i = 0; i < edits; ++i) Mutate(rng, source, corpus);
  } else {
    source = Generator(rng).Template();
    if (Chance(rng, 30)) Mutate(rng, source, corpus);
  }
  const Json ctx = MutatedContext(rng, corpus.contexts[Pick(rng, corpus.contexts.size())]);
  const TemplateLimits limits = CaseLimits(rng);
  if (print)
    std::printf("case %lld template:\n%s\n", static_cast<long long>(index), source.c_str());
  CaseResult r;
  try {
    std::string out = ChatTemplate::Parse(source, "fuzz.jinja", limits).Render(ctx);
    if (print) std::printf("rendered %zu bytes\n", out.size());
  } catch (const m3::Error& e) {
    if (print) std::printf("error: %s\n", e.what());
    r.outcome = e.code() == m3::ErrorCode::kTooLarge ? 2 : 1;
    if (e.code() != m3::ErrorCode::kInvalidArgument && e.code() != m3::ErrorCode::kTooLarge) {
      r.bug = true;
      r.what = "unexpected error code: " + std::string(e.what());
    }
  } catch (const std::exception& e) {
    r.bug = true;
    r.what = std::string("non-m3 exception: ") + e.what();
  }
  return r;
}

}  // namespace

TEST_CASE("template engine fuzzing: every case renders or fails with a clean error") {
  if (const char* only = std::getenv("M3_FUZZ_ONLY"); only && *only) {
    CaseResult r = RunCase(std::strtoll(only, nullptr, 10), true);
    CHECK_MESSAGE(!r.bug, r.what);
    return;
  }
  const int64_t first = EnvInt("M3_FUZZ_FIRST", 0);
  const int64_t count = EnvInt("M3_FUZZ_ITERATIONS", 3000);
  const int64_t progress = EnvInt("M3_FUZZ_PROGRESS", 0);
  const auto start = std::chrono::steady_clock::now();
  int64_t bugs = 0;
  int64_t outcomes[3] = {0, 0, 0};
  for (int64_t i = first; i < first + count; ++i) {
    CaseResult r = RunCase(i, false);
    ++outcomes[r.outcome];
    if (r.bug) {
      ++bugs;
      FAIL_CHECK("case " << i << " (replay with M3_FUZZ_ONLY=" << i << "): " << r.what);
    }
    if (progress > 0 && (i - first + 1) % progress == 0) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("fuzz: %lld cases done (up to %lld), %lld bugs, %.0f s\n",
                  static_cast<long long>(i - first + 1), static_cast<long long>(i),
                  static_cast<long long>(bugs), s);
      std::fflush(stdout);
    }
  }
  MESSAGE(count << " cases from " << first << ": " << outcomes[0] << " rendered, " << outcomes[1]
                << " invalid, " << outcomes[2] << " over a limit; " << bugs << " bugs");
}
