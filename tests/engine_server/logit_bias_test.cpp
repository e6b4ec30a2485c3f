// logit_bias through the engine core (ToyRunner, host sampler): a token banned with -100 never
// appears, in greedy and seeded sampling, while the same request unbiased draws it; +100 on a
// token makes greedy decoding pick it every step; out-of-vocabulary ids are refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "engine/runtime/engine_core.h"
#include "shared/error.h"
#include "tests/engine_server/engine_test_util.h"
#include "tests/runtime/toy_runner.h"

namespace m3::test {
namespace {

using engine::EngineConfig;
using engine::EngineCore;
using engine::EngineRequest;

EngineRequest Request(const std::string& id, double temperature) {
  EngineRequest r;
  r.id = id;
  r.prompt = {1, 2, 3, 4, 5, 6, 7};
  r.sampling.temperature = temperature;
  r.sampling.seed = 1234;
  r.sampling.max_tokens = 48;
  r.sampling.ignore_eos = true;
  r.sampling.eos_token_ids = {ToyRunner::kEos};
  return r;
}

Collected Run(EngineCore& e, EngineRequest r) {
  Collector col;
  const std::string id = r.id;
  e.Submit(std::move(r), col.Sink(id));
  return col.Wait(id);
}

TEST_CASE("logit_bias -100 bans tokens; +100 forces one; through the engine core") {
  EngineConfig cfg;
  cfg.page_size = 8;
  cfg.kv_pages = 64;
  EngineCore e(std::make_unique<ToyRunner>(), cfg);
  for (double temperature : {0.0, 1.0}) {
    INFO("temperature " << temperature);
    const Collected plain = Run(e, Request("plain", temperature));
    REQUIRE(plain.tokens.size() == 48);
    // Ban the most frequent half of what the unbiased run produced.
    std::map<int32_t, int> freq;
    for (int32_t t : plain.tokens) ++freq[t];
    std::vector<std::pair<int, int32_t>> by_count;
    for (auto [t, c] : freq) by_count.emplace_back(-c, t);
    std::sort(by_count.begin(), by_count.end());
    std::set<int32_t> banned;
    for (size_t i = 0; i < std::max<size_t>(1, by_count.size() / 2); ++i)
      banned.insert(by_count[i].second);
    EngineRequest biased = Request("biased", temperature);
    for (int32_t t : banned) biased.sampling.logit_bias.emplace_back(t, -100.0f);
    const Collected got = Run(e, biased);
    REQUIRE(got.tokens.size() == 48);
    for (int32_t t : got.tokens) CHECK(banned.count(t) == 0);
  }
  EngineRequest forced = Request("forced", 0.0);
  forced.sampling.logit_bias = {{17, 100.0f}};
  const Collected f = Run(e, forced);
  REQUIRE(f.tokens.size() == 48);
  CHECK(std::all_of(f.tokens.begin(), f.tokens.end(), [](int32_t t) { return t == 17; }));
}

TEST_CASE("ResolveSamplingParams: logit_bias ids checked, biases clamped and sorted") {
  engine::SamplingRequest q;
  q.max_tokens = 4;
  q.logit_bias = {{9, 250.0f}, {3, -1000.0f}, {5, 0.5f}};
  const engine::SamplingParams p = engine::ResolveSamplingParams(q, {}, {}, 64, 1);
  REQUIRE(p.logit_bias.size() == 3);
  CHECK(p.logit_bias[0] == std::pair<int32_t, float>{3, -100.0f});
  CHECK(p.logit_bias[1] == std::pair<int32_t, float>{5, 0.5f});
  CHECK(p.logit_bias[2] == std::pair<int32_t, float>{9, 100.0f});
  q.logit_bias = {{64, 1.0f}};
  CHECK_THROWS_WITH_AS(engine::ResolveSamplingParams(q, {}, {}, 64, 1),
                       doctest::Contains("logit_bias: 64 is outside the vocabulary"), Error);
  q.logit_bias = {{1, 1.0f}, {1, 2.0f}};
  CHECK_THROWS_WITH_AS(engine::ResolveSamplingParams(q, {}, {}, 64, 1), doctest::Contains("twice"),
                       Error);
}

}  // namespace
}  // namespace m3::test
