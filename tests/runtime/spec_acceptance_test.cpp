// Speculative decoding's model-free parts: n-gram prompt lookup, the exact acceptance of drafts
// (greedy prefix + bonus; seeded sampling drawing from the target distribution, checked by a
// chi-square test over 10^4 draws, and coupled to the plain sampler's draw token for token),
// the back-off of k, and the KV manager giving back rejected drafts' pages.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/runtime/kv_cache_manager.h"
#include "engine/spec/draft_acceptance.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/speculation_backoff.h"
#include "engine/spec/speculative_config.h"
#include "shared/error.h"

namespace m3::test {
namespace {

using engine::BatchSampler;
using engine::SamplingParams;
using engine::spec::NgramProposer;

// softmax(logits / t) of a small vocabulary.
std::vector<double> Softmax(const std::vector<float>& logits, double t) {
  double m = logits[0], s = 0;
  for (float v : logits) m = std::max<double>(m, v);
  std::vector<double> p;
  for (float v : logits) s += std::exp((v - m) / t);
  for (float v : logits) p.push_back(std::exp((v - m) / t) / s);
  return p;
}

// Pearson's statistic of `counts` against the probabilities `p`.
double ChiSquare(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double chi = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * static_cast<double>(n);
    chi += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return chi;
}

}  // namespace

TEST_CASE("n-gram lookup proposes what followed the latest earlier match of the longest suffix") {
  NgramProposer ngram(1, 3);
  std::vector<int32_t> out;
  // Suffix [1, 2] (the 3-gram [4, 1, 2] occurs nowhere earlier): it followed at 0 by 3, 4, 1.
  ngram.ProposeOne(std::vector<int32_t>{1, 2, 3, 4, 1, 2}, 3, out);
  CHECK(out == std::vector<int32_t>{3, 4, 1});
  // The longest n wins over a more recent shorter match; at most max_drafts tokens.
  ngram.ProposeOne(std::vector<int32_t>{7, 8, 9, 5, 9, 6, 7, 8, 9}, 2, out);
  CHECK(out == std::vector<int32_t>{5, 9});
  // The latest occurrence of the suffix, with what remains after it.
  ngram.ProposeOne(std::vector<int32_t>{5, 1, 5, 2, 5}, 4, out);
  CHECK(out == std::vector<int32_t>{2, 5});
  ngram.ProposeOne(std::vector<int32_t>{1, 2, 3}, 3, out);
  CHECK(out.empty());
  NgramProposer bigram(2, 2);
  bigram.ProposeOne(std::vector<int32_t>{4, 1, 2, 4}, 3, out);  // only unigram matches
  CHECK(out.empty());
  CHECK_THROWS_AS(NgramProposer(0, 2), Error);
  CHECK_THROWS_AS(NgramProposer(3, 2), Error);
}

TEST_CASE("greedy acceptance: the longest prefix equal to the argmax, plus the bonus token") {
  constexpr int64_t V = 5;
  BatchSampler sampler(V);
  SamplingParams greedy;
  greedy.temperature = 0;
  // Argmax per row: 2, 4, 1, 3.
  const std::vector<float> logits = {0, 0, 9, 0, 0, 0, 0, 0, 0, 9, 0, 9, 0, 0, 0, 0, 0, 0, 9, 0};
  const std::vector<int32_t> prompt = {1, 1};
  std::vector<int32_t> none;
  CHECK(engine::spec::SpeculativeSample(sampler, logits.data(), greedy, prompt, none,
                                        std::vector<int32_t>{2, 4, 1}) ==
        std::vector<int32_t>{2, 4, 1, 3});
  CHECK(engine::spec::SpeculativeSample(sampler, logits.data(), greedy, prompt, none,
                                        std::vector<int32_t>{2, 0, 1}) ==
        std::vector<int32_t>{2, 4});
  CHECK(engine::spec::SpeculativeSample(sampler, logits.data(), greedy, prompt, none,
                                        std::vector<int32_t>{3, 4, 1}) == std::vector<int32_t>{2});
  CHECK(engine::spec::SpeculativeSample(sampler, logits.data(), greedy, prompt, none, {}) ==
        std::vector<int32_t>{2});
}

TEST_CASE("seeded speculative sampling draws from the target distribution (chi-square, 10^4)") {
  constexpr int64_t V = 6;
  constexpr int kDraws = 10000;
  // df = 5: the chi-square statistic exceeds 15.086 with probability 0.01.
  constexpr double kCritical = 15.086;
  BatchSampler sampler(V);
  SamplingParams p;
  p.temperature = 0.8;
  // Two verify rows; drafts: a likely token first, then an unlikely one.
  const std::vector<float> row0 = {1.0f, 0.2f, 2.0f, -0.5f, 0.7f, 1.4f};
  const std::vector<float> row1 = {0.3f, 1.1f, -1.0f, 0.9f, 0.0f, 0.5f};
  std::vector<float> logits = row0;
  logits.insert(logits.end(), row1.begin(), row1.end());
  logits.insert(logits.end(), row0.begin(), row0.end());  // bonus row
  const std::vector<double> p0 = Softmax(row0, p.temperature), p1 = Softmax(row1, p.temperature);
  const std::vector<int32_t> prompt = {0, 1}, output = {3};
  const std::vector<int32_t> drafts = {2, 4};
  std::vector<int64_t> first(V, 0), second(V, 0);
  int64_t accepted_first = 0;
  for (int i = 0; i < kDraws; ++i) {
    p.seed = 1000 + static_cast<uint64_t>(i);
    const std::vector<int32_t> out =
        engine::spec::SpeculativeSample(sampler, logits.data(), p, prompt, output, drafts);
    REQUIRE(!out.empty());
    ++first[static_cast<size_t>(out[0])];
    if (out[0] == drafts[0]) {
      ++accepted_first;
      REQUIRE(out.size() >= 2);
      ++second[static_cast<size_t>(out[1])];
    }
  }
  // The first emitted token follows p0 whether the draft was accepted or not.
  const double chi0 = ChiSquare(first, p0);
  MESSAGE("chi-square first token: " << chi0);
  CHECK(chi0 < kCritical);
  // Given the first draft was accepted, the next token follows row 1's distribution.
  const double chi1 = ChiSquare(second, p1);
  MESSAGE("chi-square second token: " << chi1);
  CHECK(chi1 < kCritical);
  // The draft is accepted with probability p0(draft): within 4 standard deviations.
  const double pa = p0[2];
  CHECK(std::abs(static_cast<double>(accepted_first) / kDraws - pa) <
        4 * std::sqrt(pa * (1 - pa) / kDraws));
  // A sampler that ignored the target (always the draft) would fail the same test.
  std::vector<int64_t> biased(V, 0);
  biased[2] = kDraws;
  CHECK(ChiSquare(biased, p0) > kCritical);
}

TEST_CASE("seeded speculative sampling emits what the plain sampler draws, penalties included") {
  constexpr int64_t V = 16;
  BatchSampler sampler(V);
  SamplingParams p;
  p.temperature = 1.1;
  p.top_k = 9;
  p.top_p = 0.9;
  p.repetition_penalty = 1.3;
  p.frequency_penalty = 0.4;
  std::vector<float> logits(3 * V);
  for (size_t i = 0; i < logits.size(); ++i)
    logits[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)) * 2);
  const std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<int32_t> output = {4, 4};
  int accepted = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    p.seed = seed;
    // Plain: row 0 with the history, then row 1 with the history plus row 0's token, ...
    std::vector<int32_t> hist = output;
    std::vector<int32_t> plain;
    for (int j = 0; j < 3; ++j) {
      engine::SampleRow row{&p, prompt, hist};
      plain.push_back(sampler.SampleOne(logits.data() + j * V, row).token);
      hist.push_back(plain.back());
    }
    // Drafts: the plain tokens with the second one replaced on odd seeds.
    std::vector<int32_t> drafts = {plain[0], plain[1]};
    if (seed % 2) drafts[1] = (plain[1] + 1) % V;
    const std::vector<int32_t> spec =
        engine::spec::SpeculativeSample(sampler, logits.data(), p, prompt, output, drafts);
    const size_t n = seed % 2 ? 2 : 3;
    CHECK(spec == std::vector<int32_t>(plain.begin(), plain.begin() + static_cast<long>(n)));
    accepted += spec.size() == 3;
  }
  CHECK(accepted == 150);
}

TEST_CASE("forced acceptance accepts at the given rate whatever the target picks") {
  std::vector<engine::SampledToken> picks(4);
  for (auto& t : picks) t.token = 7;
  const std::vector<int32_t> drafts = {1, 2, 3};
  int64_t total = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed)
    total += engine::spec::AcceptedDrafts(drafts, picks, 0.5, seed, 10);
  // E[accepted] = 0.5 + 0.25 + 0.125 per step.
  CHECK(std::abs(static_cast<double>(total) / 2000 - 0.875) < 0.08);
  CHECK(engine::spec::AcceptedDrafts(drafts, picks, 1.0, 1, 0) == 3);
  CHECK(engine::spec::AcceptedDrafts(drafts, picks, 0.0, 1, 0) == 0);
  CHECK(engine::spec::AcceptedDrafts(drafts, picks) == 0);
}

TEST_CASE("back-off: all drafts at batch 1 with good acceptance, none when nothing is accepted") {
  engine::spec::SpeculationBackoff b(4, 32, 0.7);
  CHECK(b.DraftsFor(1) == 4);
  // A big batch makes each draft row cost a step share: fewer drafts.
  CHECK(b.DraftsFor(64) < 4);
  for (int i = 0; i < 100; ++i) b.Record(4, 0);
  CHECK(b.acceptance() < 0.01);
  CHECK(b.DraftsFor(1) == 0);
  // Idle steps drift the estimate back toward the prior: speculation is retried.
  for (int i = 0; i < 400; ++i) b.Record(0, 0);
  CHECK(b.DraftsFor(1) > 0);
  for (int i = 0; i < 100; ++i) b.Record(4, 4);
  CHECK(b.DraftsFor(1) == 4);
}

TEST_CASE("speculative config: methods and ranges are checked with clear errors") {
  using engine::spec::SpeculativeMethod;
  CHECK(engine::spec::ParseSpeculativeMethod("ngram") == SpeculativeMethod::kNgram);
  CHECK_THROWS_WITH_AS(engine::spec::ParseSpeculativeMethod("medusa"),
                       doctest::Contains("eagle3, mtp, ngram"), Error);
  engine::spec::SpeculativeConfig c;
  c.method = SpeculativeMethod::kNgram;
  c.num_speculative_tokens = 0;
  CHECK_THROWS_WITH_AS(engine::spec::ValidateSpeculativeConfig(c),
                       doctest::Contains("--num-speculative-tokens"), Error);
  c.num_speculative_tokens = 3;
  c.ngram_min = 4;
  c.ngram_max = 2;
  CHECK_THROWS_WITH_AS(engine::spec::ValidateSpeculativeConfig(c), doctest::Contains("--ngram-min"),
                       Error);
  c.ngram_min = 1;
  CHECK(engine::spec::MakeDraftProposer(c, 4, 192, 439) != nullptr);
}

TEST_CASE("KV truncate gives back the pages past the kept positions, tail first") {
  engine::KvCacheManager kv(8, 4);
  std::vector<int32_t> table;
  REQUIRE(kv.Allocate(table, 10));  // 3 pages
  REQUIRE(kv.Allocate(table, 16));  // + 1 for drafts
  CHECK(kv.num_free_pages() == 4);
  kv.Truncate(table, 9);  // positions [0, 9): 3 pages
  CHECK(table.size() == 3);
  CHECK(kv.num_free_pages() == 5);
  kv.Truncate(table, 12);  // nothing beyond
  CHECK(table.size() == 3);
  kv.Free(table);
  CHECK(kv.num_free_pages() == 8);
}

}  // namespace m3::test
