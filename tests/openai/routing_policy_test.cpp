// The routing policies on their own (load snapshots and prompts in, an engine id out): least
// load, round-robin around ejected engines, and cache-aware prefix affinity with its load
// fallback and bounded (LRU) prefix table.
#include <doctest/doctest.h>

#include <numeric>
#include <thread>
#include <vector>

#include "gateway/engine_client/routing_policy.h"
#include "shared/error.h"

using namespace m3::engine_client;

namespace {

std::vector<int32_t> Tokens(size_t n, int32_t first) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

CacheAwareOptions SmallBlocks() {
  CacheAwareOptions o;
  o.block_tokens = 4;
  return o;
}

}  // namespace

TEST_CASE("policy names") {
  CHECK(ParseRoutingPolicy("least-load") == RoutingPolicyKind::kLeastLoad);
  CHECK(ParseRoutingPolicy("round-robin") == RoutingPolicyKind::kRoundRobin);
  CHECK(ParseRoutingPolicy("cache-aware") == RoutingPolicyKind::kCacheAware);
  CHECK_FALSE(ParseRoutingPolicy("random").has_value());
  CHECK_FALSE(ParseRoutingPolicy("").has_value());
  for (auto k : {RoutingPolicyKind::kLeastLoad, RoutingPolicyKind::kRoundRobin,
                 RoutingPolicyKind::kCacheAware}) {
    CHECK(ParseRoutingPolicy(RoutingPolicyName(k)) == k);
  }
}

TEST_CASE("least load: the fewest outstanding requests, ties to the earliest listed") {
  LeastLoadPolicy p;
  const std::vector<EngineLoad> loads = {{0, 3}, {1, 1}, {2, 1}, {3, 2}};
  CHECK(p.Choose(loads, {}) == 1);
  CHECK(p.Choose(std::vector<EngineLoad>{{2, 0}}, {}) == 2);
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 0}, {1, 0}}, {}) == 0);
}

TEST_CASE("round-robin: each engine in turn, skipping the ones not eligible") {
  RoundRobinPolicy p;
  const std::vector<EngineLoad> all = {{0, 9}, {1, 0}, {2, 5}};
  std::vector<size_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(p.Choose(all, {}));
  CHECK(got == std::vector<size_t>{0, 1, 2, 0});  // load plays no part
  // Engine 1 ejected: 2 follows 0, then around again.
  const std::vector<EngineLoad> without_1 = {{0, 0}, {2, 0}};
  CHECK(p.Choose(without_1, {}) == 2);
  CHECK(p.Choose(without_1, {}) == 0);
  CHECK(p.Choose(all, {}) == 1);  // back: its turn comes again
}

TEST_CASE("prefix hashes: whole blocks, chained") {
  const auto a = Tokens(10, 100);
  const auto h = CacheAwarePolicy::PrefixHashes(a, 4);
  CHECK(h.size() == 2);  // the last two tokens are no whole block
  CHECK(CacheAwarePolicy::PrefixHashes(Tokens(3, 100), 4).empty());
  CHECK(CacheAwarePolicy::PrefixHashes({}, 4).empty());
  // Same prefix, same hashes, whatever follows.
  CHECK(CacheAwarePolicy::PrefixHashes(Concat(Tokens(8, 100), Tokens(8, 7)), 4)[1] == h[1]);
  // A change in the second block changes its hash (and every later one), not the first's.
  auto b = a;
  b[5] = 1;
  const auto hb = CacheAwarePolicy::PrefixHashes(b, 4);
  CHECK(hb[0] == h[0]);
  CHECK(hb[1] != h[1]);
  // Position matters: the same tokens in another order differ.
  auto c = a;
  std::swap(c[0], c[1]);
  CHECK(CacheAwarePolicy::PrefixHashes(c, 4)[0] != h[0]);
  // The block size is part of the hash: 8 tokens in blocks of 8 are not two blocks of 4.
  CHECK(CacheAwarePolicy::PrefixHashes(a, 8)[0] != h[1]);
}

TEST_CASE("cache-aware: a prompt goes back to the engine that served its prefix") {
  CacheAwarePolicy p(SmallBlocks());
  const std::vector<EngineLoad> idle = {{0, 0}, {1, 0}, {2, 0}};
  const auto system = Tokens(8, 1000);  // a shared two-block "system prompt"
  const auto chat_a = Concat(system, Tokens(8, 1));
  const auto chat_b = Concat(system, Tokens(8, 2));

  // Nothing known: least load (engine 1 is the idle one here).
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 2}, {1, 0}, {2, 1}}, chat_a) == 1);
  // The same conversation comes back to engine 1 although engine 0 is now less loaded.
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 0}, {1, 3}, {2, 0}}, chat_a) == 1);
  // A longer turn of it too (longest match: all of chat_a).
  CHECK(p.Choose(idle, Concat(chat_a, Tokens(12, 50))) == 1);

  // Another conversation with the same system prompt matches it on engine 1 as well.
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 0}, {1, 2}, {2, 0}}, chat_b) == 1);
  // chat_b was served last on 1; now say engine 1 is ejected: chat_b goes by load, to 2...
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 1}, {2, 0}}, chat_b) == 2);
  // ...and 2 is now the engine of chat_b (and of the system prompt, served last there), while
  // chat_a's own blocks stay with 1: the longest match decides.
  CHECK(p.Choose(idle, chat_b) == 2);
  CHECK(p.Choose(idle, chat_a) == 1);
  CHECK(p.Choose(idle, Concat(system, Tokens(8, 3))) == 1);  // system last touched by chat_a
}

TEST_CASE("cache-aware: an engine too busy for its prefix loses the request to least load") {
  CacheAwarePolicy p(SmallBlocks());  // threshold: 2 * least + 4
  const auto prompt = Tokens(16, 7);
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 0}, {1, 0}}, prompt) == 0);
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 4}, {1, 0}}, prompt) == 0);  // 4 <= 2*0+4
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 5}, {1, 0}}, prompt) == 1);  // 5 > 4
  // The prompt is engine 1's now, but 1 is too busy for it: back to 0 by load.
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 0}, {1, 10}}, prompt) == 0);
}

TEST_CASE("cache-aware: the imbalance threshold is factor * least + slack") {
  CacheAwarePolicy p(SmallBlocks());
  const auto prompt = Tokens(8, 7);
  REQUIRE(p.Choose(std::vector<EngineLoad>{{0, 0}, {1, 0}}, prompt) == 0);
  // least = 3: the affine engine 0 keeps the request up to 2*3+4 = 10 outstanding.
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 10}, {1, 3}}, prompt) == 0);
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 11}, {1, 3}}, prompt) == 1);
  // The fallback moved the prompt to 1: it is 1's now.
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 0}, {1, 3}}, prompt) == 1);

  CacheAwareOptions strict = SmallBlocks();
  strict.imbalance_factor = 1;
  strict.imbalance_slack = 0;
  CacheAwarePolicy q(strict);
  REQUIRE(q.Choose(std::vector<EngineLoad>{{0, 0}, {1, 0}}, prompt) == 0);
  CHECK(q.Choose(std::vector<EngineLoad>{{0, 1}, {1, 1}}, prompt) == 0);
  CHECK(q.Choose(std::vector<EngineLoad>{{0, 2}, {1, 1}}, prompt) == 1);
}

TEST_CASE("cache-aware: a shorter prefix on an idler engine beats least load") {
  CacheAwarePolicy p(SmallBlocks());
  const auto system = Tokens(8, 1000);
  const auto chat = Concat(system, Tokens(8, 1));
  REQUIRE(p.Choose(std::vector<EngineLoad>{{0, 0}, {1, 0}, {2, 0}}, chat) == 0);
  // The system prompt alone is then served by engine 2 (0 and 1 busy at the time).
  REQUIRE(p.Choose(std::vector<EngineLoad>{{0, 9}, {1, 9}, {2, 0}}, system) == 2);
  // The chat's engine 0 is overloaded; the system prompt's engine 2 is not: 2, not the
  // least-loaded 1.
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 20}, {1, 0}, {2, 3}}, chat) == 2);
}

TEST_CASE("cache-aware: short prompts and the bounded prefix table") {
  CacheAwareOptions o = SmallBlocks();
  o.max_blocks = 4;
  CacheAwarePolicy p(o);
  // Under one block: least load, nothing remembered.
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 1}, {1, 0}}, Tokens(3, 5)) == 1);
  CHECK(p.remembered_blocks() == 0);

  const auto first = Tokens(4, 1);
  REQUIRE(p.Choose(std::vector<EngineLoad>{{0, 0}, {1, 0}}, first) == 0);
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 1}, {1, 0}}, first) == 0);  // remembered
  // Four other one-block prompts on engine 1 push `first` out of the table of four.
  for (int i = 0; i < 4; ++i) {
    CHECK(p.Choose(std::vector<EngineLoad>{{0, 9}, {1, 0}}, Tokens(4, 100 + 10 * i)) == 1);
  }
  CHECK(p.remembered_blocks() == 4);
  CHECK(p.Choose(std::vector<EngineLoad>{{0, 1}, {1, 0}}, first) == 1);  // forgotten: by load

  // A prompt longer than the table keeps its shortest blocks (the most shareable).
  CacheAwarePolicy q(o);
  const auto long_prompt = Tokens(40, 1);  // 10 blocks
  REQUIRE(q.Choose(std::vector<EngineLoad>{{0, 0}, {1, 0}}, long_prompt) == 0);
  CHECK(q.remembered_blocks() == 4);
  CHECK(q.Choose(std::vector<EngineLoad>{{0, 1}, {1, 0}}, Tokens(16, 1)) == 0);  // 4 blocks
}

TEST_CASE("cache-aware: options are checked") {
  auto with = [](auto change) {
    CacheAwareOptions o;
    change(o);
    return o;
  };
  CHECK_THROWS_AS(CacheAwarePolicy(with([](auto& o) { o.block_tokens = 0; })), m3::Error);
  CHECK_THROWS_AS(CacheAwarePolicy(with([](auto& o) { o.max_blocks = 0; })), m3::Error);
  CHECK_THROWS_AS(CacheAwarePolicy(with([](auto& o) { o.imbalance_factor = 0.5; })), m3::Error);
  CHECK_THROWS_AS(CacheAwarePolicy(with([](auto& o) { o.imbalance_slack = -1; })), m3::Error);
  CHECK(MakeRoutingPolicy(RoutingPolicyKind::kCacheAware) != nullptr);
}

TEST_CASE("policies are safe to share between threads") {
  CacheAwareOptions o = SmallBlocks();
  o.max_blocks = 64;
  CacheAwarePolicy cache(o);
  RoundRobinPolicy rr;
  const std::vector<EngineLoad> loads = {{0, 0}, {1, 0}, {2, 0}};
  std::vector<std::thread> threads;
  std::vector<std::vector<size_t>> counts(4, std::vector<size_t>(3));
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3000; ++i) {
        const size_t id = cache.Choose(loads, Tokens(12, (t * 3000 + i) % 50));
        CHECK_FALSE(id > 2);  // (a doctest check from several threads is allowed)
        ++counts[static_cast<size_t>(t)][rr.Choose(loads, {})];
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(cache.remembered_blocks() <= 64);
  // Round-robin shares the 12000 picks out evenly.
  for (size_t e = 0; e < 3; ++e) {
    size_t n = 0;
    for (const auto& c : counts) n += c[e];
    CHECK(n == 4000);
  }
}
