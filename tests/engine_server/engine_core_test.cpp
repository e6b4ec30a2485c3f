// EngineCore + Scheduler + caches on the ToyRunner: batched equals alone over random request
// mixes (chunk sizes, page sizes, tight page budgets forcing preemption, shared prefixes,
// images, multi-segment videos, staggered arrivals, greedy and seeded sampling); abort frees
// pages at once; the waiting queue bound; bad requests refused with a message.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/runtime/engine_core.h"
#include "shared/error.h"
#include "tests/engine_server/engine_test_util.h"
#include "tests/runtime/toy_runner.h"

namespace m3::test {
namespace {

using engine::EngineConfig;
using engine::EngineCore;
using engine::EngineRequest;
using engine::FinishReason;

// Built by appending: GCC 12's -Wrestrict misfires on `"literal" + std::to_string(i)`.
std::string Name(const char* prefix, int i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

std::unique_ptr<EngineCore> MakeEngine(EngineConfig cfg, ToyRunner** raw = nullptr) {
  auto runner = std::make_unique<ToyRunner>();
  if (raw) *raw = runner.get();
  return std::make_unique<EngineCore>(std::move(runner), cfg);
}

void WaitIdle(const EngineCore& e) {
  while (!e.Idle()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Stats are published after the loop iteration that finished the last request.
  for (int i = 0; i < 1000 && (e.Stats().running || e.Stats().waiting); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

std::vector<EngineRequest> Mix(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<EngineRequest> out;
  // Shared prefixes: a few requests start with the same text + image as the first one.
  EngineRequest base = RandomToyRequest(rng, "base", {}, {});
  for (int i = 0; i < n; ++i) {
    const bool share = i > 0 && i % 3 == 0;
    out.push_back(RandomToyRequest(rng, Name("r", i), share ? base.prompt : std::vector<int32_t>{},
                                   share ? base.media : std::vector<engine::MediaItem>{}));
  }
  return out;
}

std::map<std::string, Collected> RunAlone(const std::vector<EngineRequest>& reqs) {
  EngineConfig cfg;
  cfg.page_size = 8;
  cfg.kv_pages = 64;
  cfg.prefix_caching = false;
  auto e = MakeEngine(cfg);
  Collector col;
  std::map<std::string, Collected> out;
  for (const auto& r : reqs) {
    e->Submit(r, col.Sink(r.id));
    out[r.id] = col.Wait(r.id);
  }
  return out;
}

TEST_CASE("batched equals alone: random mixes, chunking, preemption, prefix and encoder caches") {
  const std::vector<EngineRequest> reqs = Mix(42, 24);
  const auto alone = RunAlone(reqs);
  struct Case {
    int64_t page_size, kv_pages, max_batched, chunk, max_seqs, encoder_budget;
    bool prefix;
  };
  // The largest request's full length, so tight pools still hold any one request alone.
  int64_t longest = 0;
  for (const auto& r : reqs)
    longest =
        std::max<int64_t>(longest, static_cast<int64_t>(r.prompt.size()) + r.sampling.max_tokens);
  const Case cases[] = {
      {8, 64, 512, 0, 64, 0, true},               // everything fits: one big batch
      {4, longest / 4 + 12, 64, 7, 16, 8, true},  // small chunks, encoder budget, pressure
      {2, longest / 2 + 4, 32, 0, 8, 0, false},   // tight pages: preemption, no prefix cache
      {1, longest + 6, 16, 5, 16, 4, true},       // page size 1, tiny budget, prefix cache
  };
  int64_t preemptions = 0, prefix_hits = 0, encoder_hits = 0;
  for (const Case& c : cases) {
    CAPTURE(c.page_size);
    CAPTURE(c.kv_pages);
    EngineConfig cfg;
    cfg.page_size = c.page_size;
    cfg.kv_pages = c.kv_pages;
    cfg.prefix_caching = c.prefix;
    cfg.scheduler.max_batched_tokens = c.max_batched;
    cfg.scheduler.max_prefill_chunk = c.chunk;
    cfg.scheduler.max_num_seqs = c.max_seqs;
    cfg.scheduler.encoder_budget_tokens = c.encoder_budget;
    ToyRunner* runner = nullptr;
    auto e = MakeEngine(cfg, &runner);
    Collector col;
    // Staggered arrivals: a first wave, then the rest once the first wave is decoding.
    const size_t wave = reqs.size() / 3;
    for (size_t i = 0; i < wave; ++i) e->Submit(reqs[i], col.Sink(reqs[i].id));
    col.Wait(reqs[0].id, 1);
    for (size_t i = wave; i < reqs.size(); ++i) {
      e->Submit(reqs[i], col.Sink(reqs[i].id));
      if (i % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    for (const auto& r : reqs) {
      Collected got = col.Wait(r.id);
      CAPTURE(r.id);
      CHECK(got.error == "");
      CHECK(got.tokens == alone.at(r.id).tokens);
      CHECK(got.finish == alone.at(r.id).finish);
      CHECK(got.completion_tokens == static_cast<int64_t>(got.tokens.size()));
    }
    WaitIdle(*e);
    const engine::EngineStats s = e->Stats();
    CHECK(s.kv_pages_used == 0);
    CHECK(s.running == 0);
    CHECK(runner->max_rows_seen <= c.max_batched);
    preemptions += s.preemptions;
    prefix_hits += s.prefix_hit_tokens;
    encoder_hits += s.encoder_cache_hits;
  }
  // The mixes must actually exercise what they claim to.
  CHECK(preemptions > 0);
  CHECK(prefix_hits > 0);
  CHECK(encoder_hits > 0);
}

TEST_CASE("abort frees pages at once; a full waiting queue refuses with kResourceExhausted") {
  EngineConfig cfg;
  cfg.page_size = 4;
  cfg.kv_pages = 64;
  cfg.scheduler.max_num_seqs = 2;
  cfg.scheduler.max_batched_tokens = 64;
  cfg.scheduler.max_waiting = 3;
  ToyRunner* runner = nullptr;
  auto e = MakeEngine(cfg, &runner);
  runner->execute_delay_us = 2000;
  Collector col;
  EngineRequest r;
  r.prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 100000;
  r.sampling.ignore_eos = true;
  for (int i = 0; i < 2; ++i) {
    r.id = Name("long", i);
    e->Submit(r, col.Sink(r.id));
  }
  col.Wait("long0", 3);
  col.Wait("long1", 3);
  for (int i = 2; i < 5; ++i) {
    r.id = Name("long", i);
    e->Submit(r, col.Sink(r.id));
  }
  // Two run, three wait: the queue is full now.
  r.id = "extra";
  try {
    e->Submit(r, col.Sink(r.id));
    FAIL("a full waiting queue took a request");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::kResourceExhausted);
  }
  CHECK(e->Stats().kv_pages_used > 0);
  for (int i = 0; i < 5; ++i) CHECK(e->Abort(Name("long", i)));
  for (int i = 0; i < 5; ++i) CHECK(col.Wait(Name("long", i)).finish == FinishReason::kAbort);
  CHECK_FALSE(e->Abort("long0"));
  WaitIdle(*e);
  CHECK(e->Stats().kv_pages_used == 0);
}

TEST_CASE("a request the scheduler refuses after Submit took it gets its error, not a crash") {
  // Submit checks the queue against the last published stats; a request that passes while the
  // engine thread is admitting others is refused by the scheduler instead. It must still be
  // answered through its own (live) sink: several threads flood a queue of one.
  EngineConfig cfg;
  cfg.page_size = 4;
  cfg.kv_pages = 64;
  cfg.scheduler.max_num_seqs = 1;
  cfg.scheduler.max_waiting = 1;
  auto e = MakeEngine(cfg);
  Collector col;
  std::atomic<int> refused_at_submit{0};
  std::vector<std::vector<std::string>> taken(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        EngineRequest r;
        r.id = Name(t == 0 ? "a" : t == 1 ? "b" : t == 2 ? "c" : "d", i);
        r.prompt = {1, 2, 3};
        r.sampling.temperature = 0;
        r.sampling.max_tokens = 2;
        try {
          e->Submit(r, col.Sink(r.id));
          taken[t].push_back(r.id);
        } catch (const Error& err) {
          CHECK(err.code() == ErrorCode::kResourceExhausted);
          ++refused_at_submit;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  int accepted = 0, finished = 0, refused_later = 0;
  for (const auto& ids : taken) {
    for (const std::string& id : ids) {
      ++accepted;
      const Collected c = col.Wait(id);
      if (c.finish == FinishReason::kError) {
        CHECK(c.error.find("waiting queue is full") != std::string::npos);
        ++refused_later;
      } else {
        CHECK(c.tokens.size() == 2);
        ++finished;
      }
    }
  }
  MESSAGE("accepted ", accepted, " (finished ", finished, ", refused by the scheduler ",
          refused_later, "), refused at Submit ", refused_at_submit.load());
  CHECK(finished + refused_later == accepted);
  CHECK(accepted + refused_at_submit.load() == 400);
  WaitIdle(*e);
  CHECK(e->Stats().kv_pages_used == 0);
}

TEST_CASE("a sequence that outgrows the whole KV pool ends with length, not a hang") {
  EngineConfig cfg;
  cfg.page_size = 4;
  cfg.kv_pages = 4;  // 16 tokens in all
  auto e = MakeEngine(cfg);
  Collector col;
  EngineRequest r;
  r.id = "grow";
  r.prompt = {1, 2, 3, 4, 5};
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 100;
  r.sampling.ignore_eos = true;
  e->Submit(r, col.Sink(r.id));
  Collected got = col.Wait("grow");
  CHECK(got.finish == FinishReason::kLength);
  // Positions 0..15 hold the prompt and 11 generated tokens; the 12th, sampled from position
  // 15, needs no KV of its own.
  CHECK(got.tokens.size() == 12);
}

TEST_CASE("bad requests are refused with a message naming the problem") {
  EngineConfig cfg;
  cfg.page_size = 4;
  cfg.kv_pages = 32;
  auto e = MakeEngine(cfg);
  Collector col;
  auto good = [] {
    EngineRequest r;
    r.id = std::string("x");
    r.prompt = {1, 2, ToyRunner::kImageToken, 3};
    engine::MediaItem m;
    m.grid_thw = {1, 2, 2};
    m.placeholder_tokens = 1;
    m.patch_dim = ToyRunner::kPatchDim;
    m.patches.assign(16, 0.5f);
    r.media.push_back(m);
    r.sampling.max_tokens = 2;
    return r;
  };
  auto refused = [&](EngineRequest r, const std::string& needle) {
    try {
      e->Submit(std::move(r), col.Sink("x"));
      FAIL("accepted a bad request; expected: " << needle);
    } catch (const Error& err) {
      CHECK(err.code() == ErrorCode::kInvalidArgument);
      CHECK_MESSAGE(std::string(err.what()).find(needle) != std::string::npos, err.what());
    }
  };
  EngineRequest r = good();
  r.prompt[0] = 64;
  refused(r, "outside the vocabulary");
  r = good();
  r.prompt.assign(200, 1);
  refused(r, "at most");
  r = good();
  r.prompt.clear();
  refused(r, "empty");
  r = good();
  r.media[0].patches.pop_back();
  refused(r, "patch rows");
  r = good();
  r.media[0].patches[3] = std::nanf("");
  refused(r, "not finite");
  r = good();
  r.media[0].placeholder_tokens = 2;
  refused(r, "placeholder");
  r = good();
  r.prompt.push_back(ToyRunner::kImageToken);
  refused(r, "placeholder");
  r = good();
  r.media[0].grid_thw = {1, 3, 2};
  r.media[0].patches.assign(24, 0.f);
  refused(r, "grid");
  r = good();
  r.media[0].patch_dim = 3;
  refused(r, "values per row");
  // The engine still serves.
  e->Submit(good(), col.Sink("x"));
  CHECK(col.Wait("x").finish == FinishReason::kLength);
}

}  // namespace
}  // namespace m3::test

namespace m3::test {
namespace {

class SizedOutput : public engine::EncoderOutput {
 public:
  explicit SizedOutput(int64_t bytes) : bytes_(bytes) {}
  int64_t tokens() const override { return 1; }
  int64_t bytes() const override { return bytes_; }

 private:
  int64_t bytes_;
};

TEST_CASE("encoder cache: bounded in bytes, least recently used out first") {
  engine::EncoderCache cache(100);
  cache.Insert(1, std::make_shared<SizedOutput>(40));
  cache.Insert(2, std::make_shared<SizedOutput>(40));
  CHECK(cache.Find(1) != nullptr);                     // 1 is now the most recent
  cache.Insert(3, std::make_shared<SizedOutput>(40));  // evicts 2
  CHECK(cache.Find(2) == nullptr);
  CHECK(cache.Find(1) != nullptr);
  CHECK(cache.Find(3) != nullptr);
  CHECK(cache.bytes() == 80);
  cache.Insert(4, std::make_shared<SizedOutput>(101));  // larger than the whole budget
  CHECK(cache.Find(4) == nullptr);
  CHECK(cache.entries() == 2);
}

TEST_CASE("an image is encoded once across requests; video segments once each") {
  EngineConfig cfg;
  cfg.page_size = 4;
  cfg.kv_pages = 64;
  cfg.prefix_caching = false;  // only the encoder cache can save the second encode
  ToyRunner* runner = nullptr;
  auto e = MakeEngine(cfg, &runner);
  Collector col;
  std::mt19937_64 rng(3);
  EngineRequest r = RandomToyRequest(rng, "a", {}, {});
  engine::MediaItem video;
  video.video = true;
  video.grid_thw = {3, 2, 2};
  video.placeholder_tokens = 3;
  video.patch_dim = ToyRunner::kPatchDim;
  for (int i = 0; i < 48; ++i) video.patches.push_back(0.01f * static_cast<float>(i));
  r.media = {video};
  r.prompt = {1, ToyRunner::kVideoToken, 2, ToyRunner::kVideoToken, 3, ToyRunner::kVideoToken, 4};
  e->Submit(r, col.Sink("a"));
  const Collected first = col.Wait("a");
  CHECK(runner->encodes == 3);  // three segments (one temporal group each)
  r.id.assign(1, 'b');
  e->Submit(r, col.Sink("b"));
  CHECK(col.Wait("b").tokens == first.tokens);
  CHECK(runner->encodes == 3);
  CHECK(e->Stats().encoder_cache_hits >= 3);
}

}  // namespace
}  // namespace m3::test
