// BatchSampler: greedy, the counter-based stream (same draws alone or batched, any order),
// top-k / top-p / min-p, penalties, min_tokens, logprobs, and the empirical distribution.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "engine/step/batch_sampler.h"
#include "engine/step/counter_rng.h"
#include "shared/error.h"

namespace m3::engine {
namespace {

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

TEST_CASE("greedy picks the first maximum; top_k 1 is greedy at any temperature") {
  BatchSampler s(5);
  const float logits[5] = {0.1f, 3.0f, -1.f, 3.0f, 2.f};
  SamplingParams g = Greedy();
  CHECK(s.SampleOne(logits, {&g, {}, {}}).token == 1);
  SamplingParams k1;
  k1.temperature = 5;
  k1.top_k = 1;
  CHECK(s.SampleOne(logits, {&k1, {}, {}}).token == 1);
}

TEST_CASE("a request's draws depend on (seed, tokens so far) only, not on its batch") {
  const int64_t V = 50;
  std::vector<float> a(V), b(V);
  for (int64_t i = 0; i < V; ++i) {
    a[i] = static_cast<float>(std::sin(i * 0.37));
    b[i] = static_cast<float>(std::cos(i * 0.11));
  }
  SamplingParams pa, pb;
  pa.seed = 7;
  pb.seed = 8;
  pa.temperature = pb.temperature = 1.3;
  const std::vector<int32_t> hist_a = {1, 2, 3}, hist_b = {4};
  BatchSampler alone(V), batched(V);
  SampledToken x = alone.SampleOne(a.data(), {&pa, {}, hist_a});
  std::vector<float> both(a);
  both.insert(both.begin(), b.begin(), b.end());  // b first, a second
  std::vector<SampleRow> rows = {{&pb, {}, hist_b}, {&pa, {}, hist_a}};
  std::vector<SampledToken> out;
  batched.Sample(both.data(), rows, out);
  CHECK(out[1].token == x.token);
  // The counter advances with the output: a different history length draws differently.
  CHECK(CounterUniform(7, 3) != CounterUniform(7, 4));
  CHECK(CounterUniform(7, 3) != CounterUniform(8, 3));
  CHECK(CounterUniform(7, 3) == CounterUniform(7, 3));
}

TEST_CASE("sampling frequencies follow softmax(logits / T) over many seeds") {
  const float logits[4] = {0.f, std::log(2.f), std::log(3.f), std::log(4.f)};  // p = k / 10
  BatchSampler s(4);
  std::map<int32_t, int> n;
  SamplingParams p;
  p.temperature = 1.0;
  const int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    p.seed = static_cast<uint64_t>(i);
    ++n[s.SampleOne(logits, {&p, {}, {}}).token];
  }
  for (int k = 0; k < 4; ++k)
    CHECK(n[k] / double(kDraws) == doctest::Approx((k + 1) / 10.0).epsilon(0.05));
}

TEST_CASE("top-k, top-p and min-p keep only the head of the distribution") {
  const float logits[6] = {5.f, 4.f, 3.f, 0.f, -1.f, -2.f};
  BatchSampler s(6);
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SamplingParams k;
    k.top_k = 2;
    k.seed = seed;
    CHECK(s.SampleOne(logits, {&k, {}, {}}).token < 2);
    SamplingParams tp;
    tp.top_p = 0.5;  // token 0 alone holds ~0.66
    tp.seed = seed;
    CHECK(s.SampleOne(logits, {&tp, {}, {}}).token == 0);
    SamplingParams mp;
    mp.min_p = 0.3;  // keeps p >= 0.3 * p_max: tokens 0 and 1 (e^-1 = 0.37)
    mp.seed = seed;
    CHECK(s.SampleOne(logits, {&mp, {}, {}}).token < 2);
  }
  // top_p over a large flat-ish vocabulary still picks within the nucleus (growing head path).
  const int64_t V = 5000;
  std::vector<float> flat(V);
  for (int64_t i = 0; i < V; ++i) flat[i] = static_cast<float>(-0.001 * i);
  BatchSampler big(V);
  SamplingParams tp;
  tp.top_p = 0.9;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    tp.seed = seed;
    CHECK(big.SampleOne(flat.data(), {&tp, {}, {}}).token < 2300);
  }
}

TEST_CASE("the draw walks the kept tokens in ascending id (the device sampler's order)") {
  // top-k 2 keeps ids 5 (p = 0.8 of the pair) and 1 (0.2): u below 0.2 picks id 1 first.
  std::vector<float> logits(8, -5.0f);
  logits[5] = std::log(4.0f);
  logits[1] = 0.0f;
  BatchSampler s(8);
  int low = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    for (const char* mode : {"top-k", "top-p"}) {
      SamplingParams p;
      p.seed = seed;
      if (mode[4] == 'k')
        p.top_k = 2;
      else
        p.top_p = 0.99;  // ids 5 and 1 hold 99.3%: the nucleus is the same pair
      const double u = CounterUniform(seed, 0);
      const int32_t want = u * 5.0 < 1.0 ? 1 : 5;
      INFO(mode << " seed " << seed << " u " << u);
      CHECK(s.SampleOne(logits.data(), {&p, {}, {}}).token == want);
      low += want == 1;
    }
  }
  CHECK(low > 0);  // both branches seen
}

TEST_CASE("logit_bias comes before penalties; the allowed-token mask restricts every mode") {
  const float logits[4] = {2.0f, 1.9f, 0.5f, -3.f};
  BatchSampler s(4);
  SamplingParams b = Greedy();
  b.logit_bias = {{0, -100.0f}};
  CHECK(s.SampleOne(logits, {&b, {}, {}}).token == 1);
  b.logit_bias = {{3, 4.0f}};  // -3 + 4 = 1 < 2
  CHECK(s.SampleOne(logits, {&b, {}, {}}).token == 0);
  // Bias first, then the repetition penalty divides the biased positive logit: (1 + 2) / 1.5 = 2
  // ties token 0's 2.0 and loses on id; penalizing first would give 1.9 / 1.5 + 1.2 = 2.47.
  b.logit_bias = {{1, 1.1f}};
  b.repetition_penalty = 1.5;
  const std::vector<int32_t> hist = {1};
  CHECK(s.SampleOne(logits, {&b, hist, {}}).token == 0);
  const std::vector<uint32_t> only2 = {0b0100u};
  for (double t : {0.0, 0.7, 1.5}) {
    SamplingParams p;
    p.temperature = t;
    p.top_p = 0.5;
    for (uint64_t seed = 0; seed < 20; ++seed) {
      p.seed = seed;
      const SampledToken out = s.SampleOne(logits, {&p, {}, {}, only2});
      CHECK(out.token == 2);
    }
  }
  // Everything the mask allows is masked by min_tokens: the best allowed raw logit, not the
  // raw argmax.
  SamplingParams mt = Greedy();
  mt.min_tokens = 3;
  mt.stop_token_ids = {2, 3};
  const std::vector<uint32_t> two_three = {0b1100u};
  CHECK(s.SampleOne(logits, {&mt, {}, {}, two_three}).token == 2);
}

TEST_CASE("penalties and min_tokens change the greedy choice as specified") {
  const float logits[4] = {2.0f, 1.9f, 0.5f, -3.f};
  BatchSampler s(4);
  SamplingParams rep = Greedy();
  rep.repetition_penalty = 1.2;  // 2.0 / 1.2 < 1.9
  const std::vector<int32_t> prompt = {0};
  CHECK(s.SampleOne(logits, {&rep, prompt, {}}).token == 1);
  SamplingParams neg = Greedy();
  neg.repetition_penalty = 2.0;  // negative logits are multiplied: -3 -> -6, order unchanged
  CHECK(s.SampleOne(logits, {&neg, {}, std::vector<int32_t>{3}}).token == 0);
  SamplingParams pres = Greedy();
  pres.presence_penalty = 0.2;  // output only: the prompt does not count
  CHECK(s.SampleOne(logits, {&pres, prompt, {}}).token == 0);
  const std::vector<int32_t> out0 = {0};
  CHECK(s.SampleOne(logits, {&pres, {}, out0}).token == 1);
  SamplingParams freq = Greedy();
  freq.frequency_penalty = 0.04;  // one occurrence: 1.96 > 1.9; three: 1.88 < 1.9
  const std::vector<int32_t> once = {0}, twice = {0, 0, 0};
  CHECK(s.SampleOne(logits, {&freq, {}, once}).token == 0);
  CHECK(s.SampleOne(logits, {&freq, {}, twice}).token == 1);
  SamplingParams mt = Greedy();
  mt.eos_token_ids = {0};
  mt.stop_token_ids = {1};
  mt.min_tokens = 2;
  CHECK(s.SampleOne(logits, {&mt, {}, once}).token == 2);   // eos and stop masked
  CHECK(s.SampleOne(logits, {&mt, {}, twice}).token == 0);  // allowed again
  mt.ignore_eos = true;
  CHECK(s.SampleOne(logits, {&mt, {}, once}).token == 0);  // eos is not a stop: not masked
}

TEST_CASE("logprobs are the model's log-softmax; top n in order") {
  const float logits[3] = {1.f, 2.f, 3.f};
  BatchSampler s(3);
  SamplingParams p = Greedy();
  p.return_logprobs = true;
  p.logprobs = 2;
  SampledToken t = s.SampleOne(logits, {&p, {}, {}});
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK(t.token == 2);
  CHECK(t.logprob == doctest::Approx(3.0 - lse));
  REQUIRE(t.top.size() == 2);
  CHECK(t.top[0].first == 2);
  CHECK(t.top[1].first == 1);
  CHECK(t.top[1].second == doctest::Approx(2.0 - lse));
}

TEST_CASE("ResolveSamplingParams: defaults from generation_config, overrides, bad values") {
  GenerationConfig gc;
  gc.temperature = 0.7;
  gc.top_p = 0.8;
  gc.top_k = 20;
  gc.eos_token_ids = {5, 6};
  SamplingRequest r;
  r.max_tokens = 10;
  SamplingParams p = ResolveSamplingParams(r, gc, {9}, 100, 1234);
  CHECK(p.temperature == doctest::Approx(0.7));
  CHECK(p.top_p == doctest::Approx(0.8));
  CHECK(p.top_k == 20);
  CHECK(p.seed == 1234);
  CHECK(p.eos_token_ids == std::vector<int32_t>{5, 6});
  r.temperature = 0.0;
  r.seed = 5;
  p = ResolveSamplingParams(r, gc, {9}, 100, 1234);
  CHECK(p.greedy());
  CHECK(p.seed == 5);
  CHECK(ResolveSamplingParams(r, {}, {9}, 100, 1).eos_token_ids == std::vector<int32_t>{9});
  SamplingRequest bad = r;
  bad.max_tokens = 0;
  CHECK_THROWS_AS(ResolveSamplingParams(bad, gc, {}, 100, 1), Error);
  bad = r;
  bad.top_p = 1.5;
  CHECK_THROWS_AS(ResolveSamplingParams(bad, gc, {}, 100, 1), Error);
  bad = r;
  bad.stop_token_ids = {100};
  CHECK_THROWS_AS(ResolveSamplingParams(bad, gc, {}, 100, 1), Error);
  bad = r;
  bad.temperature = std::nan("");
  CHECK_THROWS_AS(ResolveSamplingParams(bad, gc, {}, 100, 1), Error);
}

}  // namespace
}  // namespace m3::engine
