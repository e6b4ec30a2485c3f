// Structured output in the engine core (ToyRunner, host sampler): with a grammar compiled over
// the toy vocabulary, every generated token keeps the output inside it, seeded sampling and
// batched with unconstrained requests alike, and the request ends with eos once the grammar
// can end (finish stop); a grammar that allows nothing ends the request with length at once
// (no hang, no crash); start_after_token leaves the tokens before it free.
#include <doctest/doctest.h>

#include <regex>
#include <string>

#include "engine/runtime/engine_core.h"
#include "grammar/grammar.h"
#include "tests/engine_server/engine_test_util.h"
#include "tests/runtime/toy_runner.h"

namespace m3::test {
namespace {

using engine::EngineConfig;
using engine::EngineCore;
using engine::EngineRequest;
using engine::FinishReason;

// Token i < 40 is one character of this alphabet; the placeholders, 40..62 and eos have no text.
const std::string kAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789{}:\"";

std::shared_ptr<const grammar::TokenizerVocab> ToyVocab() {
  std::vector<std::string> tokens(ToyRunner::kVocab);
  for (size_t i = 0; i < kAlphabet.size(); ++i) tokens[i] = std::string(1, kAlphabet[i]);
  return std::make_shared<grammar::TokenizerVocab>(tokens, std::vector<int32_t>{ToyRunner::kEos});
}

std::string Text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t t : ids)
    if (t >= 0 && static_cast<size_t>(t) < kAlphabet.size()) s += kAlphabet[t];
  return s;
}

// Built by appending: GCC 12's -Wrestrict misfires on `"literal" + std::to_string(i)`.
std::string Name(int i) {
  std::string s("r");
  s += std::to_string(i);
  return s;
}

EngineRequest Request(const std::string& id, uint64_t seed) {
  EngineRequest r;
  r.id = id;
  r.prompt = {1, 2, 3, 4, 5};
  r.sampling.temperature = 1.0;
  r.sampling.seed = seed;
  r.sampling.max_tokens = 40;
  r.sampling.eos_token_ids = {ToyRunner::kEos};
  return r;
}

TEST_CASE("grammar rows: every token inside the grammar; eos once it can end; dead ends end") {
  EngineConfig cfg;
  cfg.page_size = 8;
  cfg.kv_pages = 128;
  EngineCore e(std::make_unique<ToyRunner>(), cfg);
  grammar::GrammarCompiler compiler(ToyVocab());
  const std::string pattern = "[a-f]{2,6}(x|y)[0-9]{1,3}";
  auto regex = compiler.CompileRegex(pattern);
  auto schema = compiler.CompileJsonSchema(
      R"({"type":"object","properties":{"k":{"type":"integer","minimum":3,"maximum":700}},
          "required":["k"],"additionalProperties":false})");
  Collector col;
  std::vector<std::pair<EngineRequest, engine::OutputSink>> batch;
  for (int i = 0; i < 12; ++i) {
    EngineRequest r = Request(Name(i), 100 + static_cast<uint64_t>(i));
    if (i % 3 == 0) r.grammar = regex;
    if (i % 3 == 1) r.grammar = schema;  // i % 3 == 2: unconstrained beside them
    const std::string id = r.id;
    batch.emplace_back(std::move(r), col.Sink(id));
  }
  e.SubmitAll(std::move(batch));
  for (int i = 0; i < 12; ++i) {
    const Collected c = col.Wait(Name(i));
    CAPTURE(i);
    if (i % 3 == 2) continue;
    CHECK(c.finish == FinishReason::kStop);
    REQUIRE(!c.tokens.empty());
    CHECK(c.tokens.back() == ToyRunner::kEos);
    const std::string text = Text(c.tokens);
    if (i % 3 == 0) {
      CHECK_MESSAGE(std::regex_match(text, std::regex("[a-f]{2,6}(x|y)[0-9]{1,3}")), text);
    } else {
      CHECK_MESSAGE(std::regex_match(text, std::regex("\\{\"k\":[0-9]+\\}")), text);
      const int k = std::stoi(text.substr(5));
      CHECK(k >= 3);
      CHECK(k <= 700);
    }
  }
  // A grammar no token of this vocabulary can start ('Z' is not in it): length at once.
  EngineRequest dead = Request("dead", 1);
  dead.grammar = compiler.CompileRegex("Z+");
  e.Submit(std::move(dead), col.Sink("dead"));
  const Collected d = col.Wait("dead");
  CHECK(d.finish == FinishReason::kLength);
  CHECK(d.tokens.empty());
  // start_after_token: free until token 7 ('h') is drawn; with the logits forced (+100 bias on
  // 'h' then nothing else), the grammar starts right after it.
  EngineRequest later = Request("later", 2);
  later.grammar = regex;
  later.grammar_start_after = 7;
  later.sampling.temperature = 0;
  later.sampling.logit_bias = {{7, 100.0f}};
  e.Submit(std::move(later), col.Sink("later"));
  const Collected l = col.Wait("later");
  REQUIRE(!l.tokens.empty());
  CHECK(l.tokens.front() == 7);
  // After 'h' the bias still favours it, but the grammar allows only [a-f] first.
  REQUIRE(l.tokens.size() >= 2);
  CHECK(l.tokens[1] <= 5);
  CHECK(l.finish == FinishReason::kStop);
  CHECK_MESSAGE(std::regex_match(Text(l.tokens).substr(1), std::regex(pattern)), Text(l.tokens));
}

}  // namespace
}  // namespace m3::test
