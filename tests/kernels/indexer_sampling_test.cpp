// The MSA indexer's block selection (incl. +inf local blocks, -1 slots, slot count) against a
// naive scoring, and the sampler (greedy, top-k, top-p, seeds).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kernels/cpu/msa_indexer.h"
#include "kernels/cpu/sampling.h"

namespace m3::test {
namespace {

namespace k = m3::kernels::cpu;

TEST_CASE("indexer: local blocks forced, top-k of the rest, -1 for empty slots") {
  const int heads = 2, dim = 4, tk = 11, bs = 3;  // 4 blocks, the last one partial
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> q(tk * heads * dim), kk(tk * dim);
  for (auto& x : q) x = nd(rng);
  for (auto& x : kk) x = nd(rng);
  std::vector<int64_t> pos(tk);
  for (int i = 0; i < tk; ++i) pos[i] = i;
  k::IndexerParams p{heads, dim, bs, 3, 1};
  REQUIRE(k::IndexerSlots(p, tk) == 3);
  CHECK(k::IndexerSlots(p, 4) == 2);  // min(topk, blocks)
  std::vector<int64_t> out(heads * tk * 3);
  k::IndexerSelectBlocks(q.data(), tk, kk.data(), tk, pos.data(), p, out.data());
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < tk; ++i) {
      // naive: block maxima over visible keys, own block forced, top 3, -inf -> -1
      std::vector<float> score(4, -INFINITY);
      for (int j = 0; j <= i; ++j) {
        float s = 0;
        for (int c = 0; c < dim; ++c) s += q[(i * heads + h) * dim + c] * kk[j * dim + c];
        score[j / bs] = std::max(score[j / bs], s);
      }
      score[i / bs] = INFINITY;
      std::vector<int> order = {0, 1, 2, 3};
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return score[a] > score[b]; });
      std::multiset<int64_t> want, got;
      for (int s = 0; s < 3; ++s)
        want.insert(std::isinf(score[order[s]]) && score[order[s]] < 0 ? -1 : order[s]);
      for (int s = 0; s < 3; ++s) got.insert(out[(h * tk + i) * 3 + s]);
      CHECK(got == want);
      if (i < bs) CHECK(got.count(-1) == 2);  // only block 0 is visible to the first queries
      CHECK(got.count(i / bs) == 1);
    }
}

TEST_CASE("indexer: two local blocks clamp at block 0 without duplicates") {
  k::IndexerParams p{1, 2, 4, 3, 2};
  std::vector<float> q = {1, 0}, kk(6 * 2, 0.5f);
  std::vector<int64_t> pos = {5}, out(2);  // 6 keys -> 2 blocks -> 2 slots
  k::IndexerSelectBlocks(q.data(), 1, kk.data(), 6, pos.data(), p, out.data());
  CHECK(std::set<int64_t>(out.begin(), out.end()) == std::set<int64_t>{0, 1});
  pos = {2};
  k::IndexerSelectBlocks(q.data(), 1, kk.data(), 6, pos.data(), p, out.data());
  CHECK(std::multiset<int64_t>(out.begin(), out.end()) == std::multiset<int64_t>{0, -1});
}

TEST_CASE("sampling: greedy, top-k 1, seeds, top-p") {
  std::vector<float> logits = {0.1f, 2.0f, 1.9f, -1.0f, 2.0f};
  CHECK(k::ArgMax(logits.data(), 5) == 1);  // first of the tied maxima
  k::Sampler greedy({});
  CHECK(greedy.Sample(logits.data(), 5) == 1);

  k::SamplingParams topk1{1.0f, 1.0f, 1, 42};
  k::Sampler s1(topk1);
  for (int i = 0; i < 20; ++i) CHECK(s1.Sample(logits.data(), 5) == 1);

  // top-p 0.5 over {1, 4, 2, ...}: tokens 1 and 4 hold ~0.35 each -> only they survive.
  k::SamplingParams tp{1.0f, 0.5f, 0, 9};
  k::Sampler s2(tp);
  std::map<int64_t, int> seen;
  for (int i = 0; i < 400; ++i) seen[s2.Sample(logits.data(), 5)]++;
  CHECK(seen.size() == 2);
  CHECK(seen.count(1) == 1);
  CHECK(seen.count(4) == 1);

  // Full sampling follows the softmax roughly and is reproducible per seed.
  k::SamplingParams full{1.0f, 1.0f, 0, 123};
  k::Sampler a(full), b(full);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 4000; ++i) {
    int64_t x = a.Sample(logits.data(), 5);
    CHECK(x == b.Sample(logits.data(), 5));
    counts[x]++;
  }
  double z = 0;
  for (float l : logits) z += std::exp(l);
  for (int t = 0; t < 5; ++t)
    CHECK(counts[t] / 4000.0 == doctest::Approx(std::exp(logits[t]) / z).epsilon(0.25));
  k::SamplingParams other = full;
  other.seed = 124;
  k::Sampler c(full), d(other);
  int differ = 0;
  for (int i = 0; i < 50; ++i) differ += c.Sample(logits.data(), 5) != d.Sample(logits.data(), 5);
  CHECK(differ > 0);
}

}  // namespace
}  // namespace m3::test
