// The grammar engine (grammar/): JSON Schema suite walked with random allowed tokens over the
// real test vocabulary and validated independently; masks checked against AcceptToken; regex,
// EBNF, choice and structural (M3 tool call) grammars; errors and limits; rollback and cache.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <regex>
#include <thread>

#include "grammar/grammar.h"
#include "tests/grammar/random_walk.h"
#include "tests/grammar/schema_validator.h"
#include "tests/test_util.h"

namespace {

using m3::ErrorCode;
using m3::grammar::GrammarCompiler;
using m3::grammar::GrammarMatcher;
using m3::grammar::TokenizerVocab;
using Json = nlohmann::ordered_json;

std::shared_ptr<const TokenizerVocab> TestVocab() {
  static auto vocab = [] {
    TokenizerVocab::HfOptions o;
    o.matchable_added_tokens = {"<minimax:tool_call>", "</minimax:tool_call>"};
    return TokenizerVocab::FromHuggingFaceJson(
        m3::test::ReadFile(m3::test::DataPath("tokenizer/tokenizer.json")), o);
  }();
  return vocab;
}

GrammarCompiler& Compiler() {
  static GrammarCompiler compiler(TestVocab());
  return compiler;
}

// The error code and message of compiling, or kInternal / "" when it compiled.
template <typename F>
std::pair<ErrorCode, std::string> CompileError(F&& f) {
  try {
    f();
  } catch (const m3::Error& e) {
    return {e.code(), e.what()};
  }
  return {ErrorCode::kInternal, ""};
}

bool Accepts(const std::shared_ptr<const m3::grammar::CompiledGrammar>& g, const std::string& s) {
  GrammarMatcher m(g);
  return m.AcceptBytes(s) && m.CanTerminate();
}

}  // namespace

TEST_CASE("the vocabulary decodes byte-level tokens to their bytes") {
  auto vocab = TestVocab();
  CHECK(vocab->size() >= 32000);
  size_t with_space = 0, matchable = 0;
  for (size_t i = 0; i < vocab->size(); ++i) {
    if (!vocab->matchable(static_cast<int32_t>(i))) continue;
    ++matchable;
    with_space += vocab->bytes(static_cast<int32_t>(i))[0] == ' ';
    CHECK(vocab->bytes(static_cast<int32_t>(i)).find("\xC4\xA0") == std::string::npos);  // "Ġ"
  }
  CHECK(with_space > 1000);
  CHECK(matchable + 20 > vocab->size());
  CHECK(!vocab->stop_ids().empty());
  for (int32_t id : vocab->stop_ids()) CHECK(!vocab->matchable(id));
}

TEST_CASE("JSON schema suite: random generations parse and validate") {
  std::string dir = m3::test::DataPath("grammar/schemas");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 50);
  std::mt19937_64 rng(1234);
  auto vocab = TestVocab();
  for (const auto& file : files) {
    std::string text = m3::test::ReadFile(file.string());
    Json schema = Json::parse(text);
    INFO("schema " << file.filename().string());
    auto g = Compiler().CompileJsonSchema(text);
    for (int run = 0; run < 6; ++run) {
      GrammarMatcher m(g);
      auto r = m3::test::RandomWalk(m, *vocab, rng, 40, 4000, run < 2);
      INFO("run " << run << ": " << r.text);
      REQUIRE_MESSAGE(r.error.empty(), r.error);
      REQUIRE(r.terminated);
      Json value;
      REQUIRE_NOTHROW(value = Json::parse(r.text));
      std::string why;
      CHECK_MESSAGE(m3::test::ValidateJson(value, schema, schema, why), why);
    }
  }
}

TEST_CASE("whitespace: compact by default, bounded runs when allowed") {
  std::string schema =
      R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false})";
  auto compact = Compiler().CompileJsonSchema(schema);
  CHECK(Accepts(compact, R"({"a":1})"));
  CHECK(!Accepts(compact, R"({ "a": 1 })"));
  m3::grammar::JsonSchemaOptions o;
  o.any_whitespace = true;
  o.max_whitespace = 4;
  auto loose = Compiler().CompileJsonSchema(schema, o);
  CHECK(Accepts(loose, "{ \"a\" :\n 1 }"));
  CHECK(!Accepts(loose, "{      \"a\":1}"));
}

TEST_CASE("invalid JSON is refused at the byte where it goes wrong") {
  auto g = Compiler().CompileJsonSchema(
      R"({"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":50},"s":{"type":"string"}},"required":["n","s"],"additionalProperties":false})");
  struct Case {
    std::string text;
    size_t bad;  // index of the first refused byte
  };
  for (const Case& c : {Case{R"({"n":51)", 6}, Case{R"({"n":7,"s":"x"x)", 14}, Case{R"({"m")", 2},
                        Case{R"({"n":01)", 6}, Case{R"({"n":5,"s":"a"})", 99}, Case{"[", 0},
                        Case{R"({"n":-1)", 5}, Case{R"({"n":5,"s":"\q")", 13}}) {
    INFO(c.text);
    GrammarMatcher m(g);
    size_t i = 0;
    for (; i < c.text.size(); ++i)
      if (!m.AcceptBytes(c.text.substr(i, 1))) break;
    CHECK(i == std::min(c.bad, c.text.size()));
    if (c.bad == 99) CHECK(m.CanTerminate());
  }
}

TEST_CASE("integer ranges are exact") {
  struct Range {
    long long lo, hi;
  };
  for (Range r : {Range{0, 120}, Range{-273, -5}, Range{-15, 1234}, Range{7, 7}, Range{95, 1005},
                  Range{-1000, 1000}}) {
    std::string schema = R"({"type":"integer","minimum":)" + std::to_string(r.lo) +
                         R"(,"maximum":)" + std::to_string(r.hi) + "}";
    auto g = Compiler().CompileJsonSchema(schema);
    for (long long v = r.lo - 50; v <= r.hi + 50; ++v) {
      bool in = v >= r.lo && v <= r.hi;
      CHECK_MESSAGE(Accepts(g, std::to_string(v)) == in, schema << " " << v);
    }
    std::string leading_zero = std::to_string(std::max(1LL, r.lo));
    leading_zero.insert(leading_zero.begin(), '0');
    CHECK(!Accepts(g, leading_zero));
  }
}

TEST_CASE("regular expressions match in full") {
  struct Case {
    std::string re;
    std::vector<std::string> yes, no;
  };
  std::vector<Case> cases = {
      {R"(\d{3}-\d{4})", {"555-1234"}, {"5551234", "555-123", "555-12345"}},
      {"(ab|cd)*e?", {"", "ab", "abcde", "e"}, {"abc", "ee"}},
      {"[^a-c]+x", {"zzx", "éx"}, {"ax", "x"}},
      {R"([\w.]+@[\w]+\.com)", {"a.b@c.com"}, {"@c.com", "a@c.org"}},
      {"colou?r", {"color", "colour"}, {"colouur"}},
      {"^(yes|no)$", {"yes", "no"}, {"yesno", ""}},
      {"a{2,}b{0,1}", {"aa", "aaaab"}, {"a", "abb"}},
      {"x{,}", {"x{,}"}, {"x"}},
      {"[日本]語.", {"日語x", "本語本"}, {"日語", "中語x"}},
      {R"(\x41\u00e9\.)", {"Aé."}, {"Ae."}},
      {"(?:x|y){2}", {"xy", "yy"}, {"x", "xyx"}},
  };
  for (const Case& c : cases) {
    INFO(c.re);
    auto g = Compiler().CompileRegex(c.re);
    for (const auto& s : c.yes) CHECK_MESSAGE(Accepts(g, s), s);
    for (const auto& s : c.no) CHECK_MESSAGE(!Accepts(g, s), s);
  }
  std::mt19937_64 rng(7);
  auto g = Compiler().CompileRegex(R"(\(\d{3}\) [A-Z][a-z]{1,8}, [A-Z]{2} \d{5})");
  for (int i = 0; i < 10; ++i) {
    GrammarMatcher m(g);
    auto r = m3::test::RandomWalk(m, *TestVocab(), rng, 40, 500, true);
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    CHECK(std::regex_match(r.text, std::regex(R"(\(\d{3}\) [A-Z][a-z]{1,8}, [A-Z]{2} \d{5})")));
  }
}

TEST_CASE("EBNF grammars") {
  std::string arith = R"G(
    # arithmetic over small integers
    root  ::= expr
    expr  ::= term (("+" | "-") term)*
    term  ::= factor (("*" | "/") factor)*
    factor ::= [0-9]{1,3} | "(" expr ")"
  )G";
  auto g = Compiler().CompileEbnf(arith);
  for (std::string s : {"1", "1+2*3", "(1+2)*3", "((7))", "12/(3-4)"})
    CHECK_MESSAGE(Accepts(g, s), s);
  for (std::string s : {"", "1+", "(1", "1234", "a", "1 + 2"}) CHECK_MESSAGE(!Accepts(g, s), s);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20; ++i) {
    GrammarMatcher m(g);
    auto r = m3::test::RandomWalk(m, *TestVocab(), rng, 30, 2000, true);
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    CHECK(r.terminated);
  }
  auto json_like = Compiler().CompileEbnf(R"G(
    start ::= "[" ( item ("," item)* )? "]"
    item ::= "\"" [^"\\\n]* "\"" | "null" | 'true'
  )G",
                                          "start");
  CHECK(Accepts(json_like, R"(["a b",null,true])"));
  CHECK(Accepts(json_like, "[]"));
  CHECK(!Accepts(json_like, R"(["a
"])"));
  auto right_recursive = Compiler().CompileEbnf("root ::= \"a\" root | \"b\"");
  CHECK(Accepts(right_recursive, std::string(5000, 'a') + "b"));
  auto unicode = Compiler().CompileEbnf(R"(root ::= [α-ω]+ "\u00e9" . )");
  CHECK(Accepts(unicode, "αβγé!"));
  CHECK(!Accepts(unicode, "abé!"));
}

TEST_CASE("invalid sources are refused naming the problem") {
  auto& c = Compiler();
  auto expect = [](std::pair<ErrorCode, std::string> e, ErrorCode code, const std::string& part) {
    INFO(e.second);
    CHECK(e.first == code);
    CHECK(e.second.find(part) != std::string::npos);
  };
  expect(CompileError([&] { c.CompileJsonSchema("{"); }), ErrorCode::kInvalidArgument,
         "not valid JSON");
  expect(CompileError([&] { c.CompileJsonSchema(R"({"type":"strng"})"); }),
         ErrorCode::kInvalidArgument, "unknown type 'strng'");
  expect(CompileError([&] { c.CompileJsonSchema(R"({"$ref":"#/$defs/nope"})"); }),
         ErrorCode::kInvalidArgument, "points to nothing");
  expect(CompileError([&] { c.CompileJsonSchema(R"({"$ref":"http://x/y"})"); }),
         ErrorCode::kInvalidArgument, "only local references");
  expect(
      CompileError([&] { c.CompileJsonSchema(R"({"type":"array","minItems":3,"maxItems":2})"); }),
      ErrorCode::kInvalidArgument, "maxItems < minItems");
  expect(CompileError([&] { c.CompileJsonSchema(R"({"type":"string","pattern":"(ab"})"); }),
         ErrorCode::kInvalidArgument, "pattern at #");
  expect(CompileError([&] { c.CompileJsonSchema(R"({"enum":[]})"); }), ErrorCode::kInvalidArgument,
         "enum");
  expect(
      CompileError([&] { c.CompileJsonSchema(R"({"type":"integer","minimum":5,"maximum":4})"); }),
      ErrorCode::kInvalidArgument, "no integer");
  expect(CompileError([&] { c.CompileRegex("a(?=b)"); }), ErrorCode::kInvalidArgument,
         "lookaround");
  expect(CompileError([&] { c.CompileRegex("(a"); }), ErrorCode::kInvalidArgument, "missing ')'");
  expect(CompileError([&] { c.CompileRegex("*a"); }), ErrorCode::kInvalidArgument,
         "nothing to repeat");
  expect(CompileError([&] { c.CompileRegex(R"((a)\1)"); }), ErrorCode::kInvalidArgument,
         "backreferences");
  expect(CompileError([&] { c.CompileRegex("[z-a]"); }), ErrorCode::kInvalidArgument,
         "out of order");
  expect(CompileError([&] { c.CompileEbnf("root ::= foo"); }), ErrorCode::kInvalidArgument,
         "undefined rule 'foo'");
  expect(CompileError([&] { c.CompileEbnf("root ::= \"a\"", "start"); }),
         ErrorCode::kInvalidArgument, "no root rule 'start'");
  expect(CompileError([&] { c.CompileEbnf("root ::= root \"a\" | \"b\""); }),
         ErrorCode::kInvalidArgument, "left-recursive rule 'root'");
  expect(CompileError([&] { c.CompileEbnf("root ::= \"a\nroot2 ::= \"b\""); }),
         ErrorCode::kInvalidArgument, "line 1");
  expect(CompileError([&] { c.CompileEbnf("root = \"a\""); }), ErrorCode::kInvalidArgument,
         "expected '::='");
  expect(CompileError([&] { c.CompileEbnf("root ::= x\nx ::= x \"a\" | \"b\""); }),
         ErrorCode::kInvalidArgument, "left-recursive");
  expect(CompileError([&] { c.CompileEbnf("root ::= \"a\" root"); }), ErrorCode::kInvalidArgument,
         "matches no text");
  expect(CompileError([&] { c.CompileChoice({}); }), ErrorCode::kInvalidArgument, "empty");
}

TEST_CASE("limits: size, depth, repetition and time are refused cleanly") {
  m3::grammar::CompileLimits small;
  small.max_compile_ms = 20000;
  small.max_depth = 10;
  small.max_states = 5000;
  GrammarCompiler c(TestVocab(), small, 0);
  std::string deep = "{\"type\":\"object\",\"properties\":{\"a\":";
  std::string nested;
  for (int i = 0; i < 30; ++i) nested += deep;
  nested += "{\"type\":\"integer\"}";
  for (int i = 0; i < 30; ++i) nested += "}}";
  auto e = CompileError([&] { c.CompileJsonSchema(nested); });
  CHECK(e.first == ErrorCode::kTooLarge);
  CHECK(e.second.find("deeper") != std::string::npos);
  e = CompileError([&] { c.CompileRegex("a{5000}"); });
  CHECK(e.first == ErrorCode::kTooLarge);
  CHECK(e.second.find("max_repeat") != std::string::npos);
  e = CompileError([&] { c.CompileRegex("(a|b)*a(a|b){14}"); });  // 2^14 DFA states
  CHECK(e.first == ErrorCode::kTooLarge);
  CHECK(e.second.find("max_states") != std::string::npos);
  e = CompileError([&] { c.CompileRegex(std::string(60, '(') + "a" + std::string(60, ')')); });
  CHECK(e.first == ErrorCode::kTooLarge);
  m3::grammar::CompileLimits quick;
  quick.max_compile_ms = 1;
  quick.precompute_masks = true;
  GrammarCompiler fast(TestVocab(), quick, 0);
  e = CompileError([&] {
    fast.CompileJsonSchema(
        m3::test::ReadFile(m3::test::DataPath("grammar/schemas/math_reasoning.json")));
  });
  CHECK(e.first == ErrorCode::kDeadlineExceeded);
  CHECK(e.second.find("max_compile_ms") != std::string::npos);
  m3::grammar::CompileLimits tiny_source;
  tiny_source.max_source_bytes = 10;
  GrammarCompiler t(TestVocab(), tiny_source, 0);
  CHECK(CompileError([&] { t.CompileEbnf("root ::= \"aaaaaaaaaaaa\""); }).first ==
        ErrorCode::kTooLarge);
}

TEST_CASE("an ambiguous grammar whose parses multiply is refused, not slow") {
  // Every "(" doubles the parses: two rules match the same text.
  auto g = Compiler().CompileEbnf(R"G(
    root ::= s
    s ::= t | u | "x"
    t ::= "(" s ")"
    u ::= "(" s ")"
  )G");
  GrammarMatcher m(g);
  CHECK(m.AcceptBytes("((((("));
  bool refused = false;
  for (int i = 0; i < 20 && !refused; ++i) refused = !m.AcceptBytes("(");
  CHECK(refused);
  CHECK(m.IsDeadEnd());
  GrammarMatcher shallow(g);
  CHECK(shallow.AcceptBytes("((x))"));
  CHECK(shallow.CanTerminate());
}

TEST_CASE("choice") {
  auto g = Compiler().CompileChoice({"positive", "negative", "neutral", "neg"});
  for (std::string s : {"positive", "negative", "neutral", "neg"}) CHECK(Accepts(g, s));
  CHECK(!Accepts(g, "ne"));
  CHECK(!Accepts(g, "negativ"));
}

TEST_CASE("rollback, termination, dead ends and the stop token") {
  auto vocab = TestVocab();
  auto g = Compiler().CompileChoice({"yes"});
  GrammarMatcher m(g, 4);
  int32_t stop = vocab->stop_ids()[0];
  CHECK(!m.AcceptToken(stop));
  CHECK(m.ForcedBytes() == "yes");
  CHECK(m.AcceptBytes("ye"));
  CHECK(!m.CanTerminate());
  CHECK(m.AcceptBytes("s"));
  CHECK(m.CanTerminate());
  std::vector<uint32_t> mask(vocab->mask_words());
  m.FillNextTokenBitmask(mask.data());
  size_t bits = 0;
  for (uint32_t w : mask) bits += static_cast<size_t>(__builtin_popcount(w));
  CHECK(bits == vocab->stop_ids().size());
  CHECK(m.AcceptToken(stop));
  CHECK(m.IsTerminated());
  CHECK(!m.AcceptBytes("x"));
  m.Rollback(2);
  CHECK(!m.IsTerminated());
  CHECK(!m.CanTerminate());
  CHECK(m.AcceptBytes("s"));
  CHECK_THROWS_AS(m.Rollback(10), m3::Error);
  m.Reset();
  CHECK(!m.AcceptBytes("no"));
  CHECK(!m.IsDeadEnd());
}

TEST_CASE("speculative decoding: rollback restores the exact mask") {
  auto vocab = TestVocab();
  auto g = Compiler().CompileJsonSchema(
      m3::test::ReadFile(m3::test::DataPath("grammar/schemas/ui_recursive.json")));
  std::mt19937_64 rng(3);
  GrammarMatcher m(g, 8);
  std::vector<uint32_t> before(vocab->mask_words()), after(vocab->mask_words());
  for (int step = 0; step < 30; ++step) {
    m.FillNextTokenBitmask(before.data());
    std::vector<int32_t> allowed;
    for (size_t i = 0; i < vocab->size(); ++i)
      if ((before[i / 32] >> (i % 32) & 1u) && !vocab->is_stop(static_cast<int32_t>(i)))
        allowed.push_back(static_cast<int32_t>(i));
    if (allowed.empty()) break;
    // Accept three drafts, roll back two, and compare with accepting one.
    int32_t first = allowed[rng() % allowed.size()];
    REQUIRE(m.AcceptToken(first));
    m.FillNextTokenBitmask(after.data());
    int drafted = 1;
    for (int k = 0; k < 2; ++k) {
      std::vector<uint32_t> cur(vocab->mask_words());
      m.FillNextTokenBitmask(cur.data());
      for (size_t i = 0; i < vocab->size(); ++i)
        if ((cur[i / 32] >> (i % 32) & 1u) && !vocab->is_stop(static_cast<int32_t>(i))) {
          if (m.AcceptToken(static_cast<int32_t>(i))) ++drafted;
          break;
        }
    }
    m.Rollback(drafted - 1);
    std::vector<uint32_t> again(vocab->mask_words());
    m.FillNextTokenBitmask(again.data());
    CHECK(again == after);
  }
}

TEST_CASE("lazy masks: computed on first use, or all at once by WarmMasks, same results") {
  std::string schema = m3::test::ReadFile(m3::test::DataPath("grammar/schemas/weather_tool.json"));
  m3::grammar::CompileLimits eager_limits;
  eager_limits.precompute_masks = true;
  GrammarCompiler lazy(TestVocab(), {}, 0), eager(TestVocab(), eager_limits, 0);
  auto a = lazy.CompileJsonSchema(schema);
  auto b = eager.CompileJsonSchema(schema);
  CHECK(a->masks_ready() == 0);
  CHECK(b->masks_ready() > 10);
  std::thread warm([&] { a->WarmMasks(); });
  // Masks from both while the lazy one warms up on another thread.
  std::mt19937_64 rng(17);
  auto vocab = TestVocab();
  for (int run = 0; run < 5; ++run) {
    GrammarMatcher ma(a), mb(b);
    std::vector<uint32_t> x(vocab->mask_words()), y(vocab->mask_words());
    for (int step = 0; step < 200 && !ma.IsTerminated(); ++step) {
      ma.FillNextTokenBitmask(x.data());
      mb.FillNextTokenBitmask(y.data());
      REQUIRE(x == y);
      std::vector<int32_t> allowed;
      for (size_t i = 0; i < vocab->size(); ++i)
        if (x[i / 32] >> (i % 32) & 1u) allowed.push_back(static_cast<int32_t>(i));
      REQUIRE(!allowed.empty());
      int32_t id = allowed[rng() % allowed.size()];
      REQUIRE(ma.AcceptToken(id));
      REQUIRE(mb.AcceptToken(id));
    }
  }
  warm.join();
  CHECK(a->masks_ready() == b->masks_ready());
}

TEST_CASE("cache: the same source compiles once") {
  GrammarCompiler c(TestVocab(), {}, 2);
  auto a = c.CompileRegex("abc");
  auto b = c.CompileRegex("abc");
  CHECK(a == b);
  CHECK(c.cache_hits() == 1);
  c.CompileRegex("abd");
  c.CompileRegex("abe");
  CHECK(c.cache_size() == 2);
  CHECK(c.CompileRegex("abc") != a);  // evicted: compiled again
  m3::grammar::JsonSchemaOptions loose;
  loose.any_whitespace = true;
  GrammarCompiler small(TestVocab(), {}, 100, 1);  // one byte: only the newest stays
  small.CompileRegex("a");
  small.CompileRegex("b");
  CHECK(small.cache_size() == 1);
  CHECK(c.CompileJsonSchema("{\"type\":\"integer\"}") !=
        c.CompileJsonSchema("{\"type\":\"integer\"}", loose));
}

namespace {

// Reads one M3 parameter value back into JSON using the schema's type (as the gateway's
// tool-call parser does), for validation.
Json ParseXmlValue(const std::string& text, const Json& schema, const std::string& ns);

Json ParseXmlObject(const std::string& text, const Json& schema, const std::string& ns) {
  Json out = Json::object();
  size_t pos = 0;
  while (pos < text.size()) {
    REQUIRE(text.compare(pos, ns.size() + 1, ns + "<") == 0);
    size_t name_end = text.find('>', pos + ns.size());
    std::string name = text.substr(pos + ns.size() + 1, name_end - pos - ns.size() - 1);
    std::string close = ns + "</" + name + ">";
    // The matching close tag at this nesting level.
    size_t depth = 0, i = name_end + 1, end = std::string::npos;
    std::string open = ns + "<" + name + ">";
    while (i < text.size()) {
      if (text.compare(i, open.size(), open) == 0) {
        ++depth;
        i += open.size();
      } else if (text.compare(i, close.size(), close) == 0) {
        if (depth == 0) {
          end = i;
          break;
        }
        --depth;
        i += close.size();
      } else {
        ++i;
      }
    }
    REQUIRE(end != std::string::npos);
    Json sub = schema.contains("properties") && schema["properties"].contains(name)
                   ? schema["properties"][name]
                   : Json::object();
    out[name] = ParseXmlValue(text.substr(name_end + 1, end - name_end - 1), sub, ns);
    pos = end + close.size();
  }
  return out;
}

Json ParseXmlValue(const std::string& text, const Json& schema, const std::string& ns) {
  std::string type = schema.contains("type") && schema["type"].is_string()
                         ? schema["type"].get<std::string>()
                         : "";
  if (type == "object") return ParseXmlObject(text, schema, ns);
  if (type == "array") {
    Json wrapper = {{"type", "object"},
                    {"properties", {{"item", schema.value("items", Json::object())}}}};
    Json arr = Json::array();
    std::string item_open = ns + "<item>";
    size_t pos = 0;
    while (pos < text.size()) {
      // Split the concatenated <item> elements one by one.
      std::string one;
      size_t depth = 0, i = pos + item_open.size();
      std::string close = ns + "</item>";
      while (i < text.size()) {
        if (text.compare(i, item_open.size(), item_open) == 0) {
          ++depth;
          i += item_open.size();
        } else if (text.compare(i, close.size(), close) == 0) {
          if (depth == 0) break;
          --depth;
          i += close.size();
        } else {
          ++i;
        }
      }
      arr.push_back(ParseXmlValue(text.substr(pos + item_open.size(), i - pos - item_open.size()),
                                  schema.value("items", Json::object()), ns));
      pos = i + close.size();
    }
    return arr;
  }
  if (type == "string" || type.empty()) return text;
  return Json::parse(text);
}

}  // namespace

TEST_CASE("structural: M3 tool calls with XML parameters following each tool's schema") {
  const std::string ns = "<minimax:tool_call>";  // stands in for M3's namespace token here
  Json weather = Json::parse(
      R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7},"units":{"type":"string","enum":["c","f"]}},"required":["city","days"]})");
  Json todo = Json::parse(
      R"({"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"title":{"type":"string","maxLength":10},"done":{"type":"boolean"}},"required":["title","done"]},"minItems":1,"maxItems":2}},"required":["items"]})");
  m3::grammar::StructuralSpec spec;
  spec.prefix = ns + "<tool_call>\n";
  spec.suffix = ns + "</tool_call>";
  spec.min_count = 1;
  spec.max_count = -1;
  for (auto [name, schema] :
       {std::pair{std::string("get_weather"), weather}, std::pair{std::string("todo"), todo}}) {
    m3::grammar::StructuralTag t;
    t.begin = ns + "<invoke name=\"" + name + "\">";
    t.schema_json = schema.dump();
    t.format = m3::grammar::ArgumentFormat::kM3Xml;
    t.xml_tag_prefix = ns;
    t.end = ns + "</invoke>\n";
    spec.tags.push_back(t);
  }
  auto g = Compiler().CompileStructural(spec);
  std::string call = ns + "<tool_call>\n" + ns + "<invoke name=\"get_weather\">" + ns +
                     "<city>Seattle, WA" + ns + "</city>" + ns + "<days>3" + ns + "</days>" + ns +
                     "</invoke>\n" + ns + "</tool_call>";
  CHECK(Accepts(g, call));
  std::string bad_days = call;
  bad_days[bad_days.find("<days>3") + 6] = '9';
  CHECK(!Accepts(g, bad_days));
  std::string bad_tool = call;
  bad_tool.replace(bad_tool.find("get_weather"), 11, "get_wheater");
  CHECK(!Accepts(g, bad_tool));
  std::string missing_required = ns + "<tool_call>\n" + ns + "<invoke name=\"get_weather\">" + ns +
                                 "<city>x" + ns + "</city>" + ns + "</invoke>\n" + ns +
                                 "</tool_call>";
  CHECK(!Accepts(g, missing_required));
  std::mt19937_64 rng(5);
  auto vocab = TestVocab();
  int calls = 0;
  for (int run = 0; run < 12; ++run) {
    GrammarMatcher m(g);
    auto r = m3::test::RandomWalk(m, *vocab, rng, 60, 4000, run < 3, ns + "</tool_call>");
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    REQUIRE(r.terminated);
    INFO(r.text);
    REQUIRE(r.text.rfind(spec.prefix, 0) == 0);
    std::string body =
        r.text.substr(spec.prefix.size(), r.text.size() - spec.prefix.size() - spec.suffix.size());
    size_t pos = 0;
    while (pos < body.size()) {
      size_t name_at = body.find("<invoke name=\"", pos) + 14;
      std::string name = body.substr(name_at, body.find('"', name_at) - name_at);
      size_t args_at = body.find("\">", name_at) + 2;
      std::string end = ns + "</invoke>\n";
      size_t args_end = body.find(end, args_at);
      REQUIRE(args_end != std::string::npos);
      const Json& schema = name == "todo" ? todo : weather;
      Json args = ParseXmlObject(body.substr(args_at, args_end - args_at), schema, ns);
      std::string why;
      CHECK_MESSAGE(m3::test::ValidateJson(args, schema, schema, why),
                    why << " in " << args.dump());
      ++calls;
      pos = args_end + end.size();
    }
  }
  CHECK(calls >= 12);
  // One call only, with free text before it.
  spec.max_count = 1;
  spec.allow_free_text = true;
  auto one = Compiler().CompileStructural(spec);
  CHECK(Accepts(one, "Let me check. " + call));
  std::string two = call;
  two.insert(two.find(ns + "</tool_call>"), ns + "<invoke name=\"get_weather\">" + ns + "<city>x" +
                                                ns + "</city>" + ns + "<days>1" + ns + "</days>" +
                                                ns + "</invoke>\n");
  CHECK(!Accepts(one, two));
}

TEST_CASE("json_object: any object, nothing else") {
  auto g = Compiler().CompileJsonObject();
  CHECK(Accepts(g, R"({"a":[1,{"b":null}],"c":"d"})"));
  CHECK(Accepts(g, "{}"));
  CHECK(!Accepts(g, "[]"));
  CHECK(!Accepts(g, "1"));
  std::mt19937_64 rng(9);
  for (int i = 0; i < 10; ++i) {
    GrammarMatcher m(g);
    auto r = m3::test::RandomWalk(m, *TestVocab(), rng, 30, 4000, i < 3);
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    Json v;
    REQUIRE_NOTHROW(v = Json::parse(r.text));
    CHECK(v.is_object());
  }
}

TEST_CASE("structural: M2 tool calls (<parameter name=...> lines, JSON for non-strings)") {
  Json schema = Json::parse(
      R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7},"tags":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":2},"mode":{"type":"string","enum":["fast","slow"]}},"required":["city","days"]})");
  m3::grammar::StructuralSpec spec;
  spec.prefix = "<minimax:tool_call>\n";
  spec.suffix = "</minimax:tool_call>";
  spec.max_count = -1;
  m3::grammar::StructuralTag t;
  t.begin = "<invoke name=\"get_weather\">\n";
  t.schema_json = schema.dump();
  t.format = m3::grammar::ArgumentFormat::kM2Xml;
  t.end = "</invoke>\n";
  spec.tags.push_back(t);
  auto g = Compiler().CompileStructural(spec);
  std::string call =
      "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris, "
      "<France></parameter>\n<parameter name=\"days\">3</parameter>\n<parameter "
      "name=\"tags\">[\"a\",\"b\"]</parameter>\n</invoke>\n</minimax:tool_call>";
  CHECK(Accepts(g, call));
  std::string bad = call;
  bad[bad.find(">3<") + 1] = '8';
  CHECK(!Accepts(g, bad));
  std::mt19937_64 rng(21);
  const std::regex param(R"RE(<parameter name="([^"]+)">([\s\S]*?)</parameter>\n)RE");
  for (int run = 0; run < 10; ++run) {
    GrammarMatcher m(g);
    auto r = m3::test::RandomWalk(m, *TestVocab(), rng, 50, 4000, run < 3, "</parameter>\n");
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    REQUIRE(r.terminated);
    INFO(r.text);
    size_t calls = 0;
    for (size_t at = r.text.find("<invoke"); at != std::string::npos;
         at = r.text.find("<invoke", at + 1)) {
      size_t end = r.text.find("</invoke>", at);
      std::string body = r.text.substr(at, end - at);
      Json args = Json::object();
      for (std::sregex_iterator it(body.begin(), body.end(), param), stop; it != stop; ++it) {
        std::string name = (*it)[1], value = (*it)[2];
        bool is_string = schema["properties"][name]["type"] == "string";
        args[name] = is_string ? Json(value) : Json::parse(value);
      }
      std::string why;
      CHECK_MESSAGE(m3::test::ValidateJson(args, schema, schema, why), why << " " << args.dump());
      ++calls;
    }
    CHECK(calls >= 1);
  }
}
