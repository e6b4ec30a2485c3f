// Scheduler unit tests on the ToyRunner, one engine step at a time by hand: plan
// (Scheduler::Schedule), run the planned encodes (RunScheduledEncodes), lay out the batch,
// execute it on the toy (which checks the ForwardBatch contract and reads every cached position
// back through the block tables), commit. Each test states the exact rows of every step, so a
// change in ordering, chunking, prefix hits, preemption or encode planning shows as a diff.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/encoder_cache.h"
#include "engine/runtime/kv_cache_manager.h"
#include "engine/runtime/scheduled_encodes.h"
#include "engine/runtime/scheduler.h"
#include "shared/error.h"
#include "tests/runtime/toy_runner.h"

namespace m3::test {
namespace {

using engine::EncoderCache;
using engine::KvCacheManager;
using engine::MediaItem;
using engine::ScheduledStep;
using engine::Scheduler;
using engine::SchedulerConfig;
using engine::SegmentSlot;
using engine::Sequence;

constexpr int32_t kNext = 7;  // what every sampled sequence draws (sampling is not under test)
constexpr int32_t kImg = ToyRunner::kImageToken;
constexpr int32_t kVid = ToyRunner::kVideoToken;

// Strings are built by appending: GCC 12's -Wrestrict misfires on `"literal" + std::string`.
std::string Join(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) {
    if (!s.empty()) s += ' ';
    s += std::to_string(x);
  }
  return s;
}

// The tokens first, first + 1, ... (n of them).
std::vector<int32_t> Text(int32_t first, int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Patches of grid (t, h, w) whose values start at `base`; the toy makes t * h * w / 4 feature
// rows, one segment per image and one per temporal group of a video.
MediaItem Media(bool video, std::array<int64_t, 3> grid, float base) {
  MediaItem m;
  m.video = video;
  m.grid_thw = grid;
  m.patch_dim = ToyRunner::kPatchDim;
  const int64_t rows = grid[0] * grid[1] * grid[2];
  m.placeholder_tokens = rows / 4;
  for (int64_t i = 0; i < rows * m.patch_dim; ++i)
    m.patches.push_back(base + 0.01f * static_cast<float>(i));
  return m;
}

// What one step planned and ran, as strings that read like the plan.
struct StepRecord {
  std::string rows;  // "id@context+rows" per sequence, batch order
  int32_t num_decodes = 0;
  std::string token_ids, positions, logits_rows;
  std::vector<std::string> encodes;  // "id#segment" (+ "<id#segment" per sharer), in order
  std::vector<std::string> failed;   // "id: message"
  std::vector<ErrorCode> failed_codes;
  std::vector<std::string> out_of_capacity;
  std::vector<std::string> media;  // "row+length@offset" per span
  std::vector<const engine::EncoderOutput*> media_features;
  int64_t preempted = 0;
};

// The engine's step without its threads or sampling: a Scheduler over a KvCacheManager and an
// EncoderCache, the ToyRunner as the model, finishing as EngineCore::Step does.
class StepDriver {
 public:
  StepDriver(const SchedulerConfig& config, int64_t pages, int64_t page_size, bool prefix_caching,
             int64_t encoder_cache_bytes = int64_t{1} << 20)
      : kv(pages, page_size, prefix_caching),
        cache(encoder_cache_bytes),
        scheduler(config, kv, cache) {
    runner.AllocateKvCache(pages, page_size);
  }

  Sequence* Add(const std::string& id, std::vector<int32_t> prompt,
                std::vector<MediaItem> media = {}) {
    engine::EngineRequest r;
    r.id = id;
    r.prompt = std::move(prompt);
    r.media = std::move(media);
    auto seq = std::make_unique<Sequence>(
        std::move(r), [](engine::RequestOutput&&) {}, runner, 0);
    Sequence* raw = seq.get();
    scheduler.Add(std::move(seq));
    return raw;
  }

  StepRecord Step() {
    ScheduledStep step = scheduler.Schedule();
    StepRecord rec;
    auto slot = [](const SegmentSlot& s) { return s.seq->id() + "#" + std::to_string(s.segment); };
    for (const engine::ScheduledEncode& e : step.encodes) {
      std::string what = slot(e.source);
      for (const SegmentSlot& s : e.sharers) {
        what += '<';
        what += slot(s);
      }
      rec.encodes.push_back(what);
    }
    engine::RunScheduledEncodes(step, runner, cache);
    scheduler.BuildBatch(step);
    const engine::ForwardBatch& b = step.batch;
    for (size_t i = 0; i < step.seqs.size(); ++i) {
      if (!rec.rows.empty()) rec.rows += ' ';
      rec.rows += step.seqs[i]->id() + "@" + std::to_string(b.context_lens[i]) + "+" +
                  std::to_string(b.query_start[i + 1] - b.query_start[i]);
    }
    rec.num_decodes = b.num_decodes;
    rec.token_ids = Join(b.token_ids);
    rec.positions = Join(b.positions);
    rec.logits_rows = Join(b.logits_rows);
    for (const engine::MediaSpan& m : b.media) {
      rec.media.push_back(std::to_string(m.row) + "+" + std::to_string(m.length) + "@" +
                          std::to_string(m.offset));
      rec.media_features.push_back(m.features.get());
    }
    rec.preempted = step.preempted;
    for (auto& [seq, err] : step.failed) {
      rec.failed.push_back(seq->id() + ": " + err.what());
      rec.failed_codes.push_back(err.code());
      scheduler.Remove(seq->id());
    }
    for (Sequence* seq : step.out_of_capacity) {
      if (scheduler.Find(seq->id()) != seq) continue;
      rec.out_of_capacity.push_back(seq->id());
      scheduler.Remove(seq->id());
    }
    if (step.empty()) return rec;
    std::vector<float> logits;
    runner.Execute(b, logits);
    scheduler.Commit(step);
    for (Sequence* s : step.sampled) s->AppendToken(kNext);
    return rec;
  }

  ToyRunner runner;
  KvCacheManager kv;
  EncoderCache cache;
  Scheduler scheduler;
};

SchedulerConfig Config(int64_t max_num_seqs, int64_t max_batched_tokens, int64_t chunk = 0,
                       int64_t encoder_budget = 0) {
  SchedulerConfig c;
  c.max_num_seqs = max_num_seqs;
  c.max_batched_tokens = max_batched_tokens;
  c.max_prefill_chunk = chunk;
  c.encoder_budget_tokens = encoder_budget;
  return c;
}

TEST_CASE("decodes first, oldest first; then running prefills; then admissions, FCFS") {
  StepDriver d(Config(4, 8), 32, 4, false);
  d.Add("a", Text(1, 5));
  d.Add("b", Text(11, 10));
  StepRecord r = d.Step();
  CHECK(r.rows == "a@0+5 b@0+3");  // b takes what the token budget leaves
  CHECK(r.num_decodes == 0);
  CHECK(r.token_ids == "1 2 3 4 5 11 12 13");
  CHECK(r.positions == "0 1 2 3 4 0 1 2");
  CHECK(r.logits_rows == "4");  // a's prompt is done, b's is not

  r = d.Step();
  CHECK(r.rows == "a@5+1 b@3+7");
  CHECK(r.num_decodes == 1);
  CHECK(r.token_ids == Join(Concat({kNext}, Text(14, 7))));
  CHECK(r.logits_rows == "0 7");

  d.Add("c", Text(21, 3));
  d.Add("d", Text(31, 6));
  r = d.Step();
  CHECK(r.rows == "a@6+1 b@10+1 c@0+3 d@0+3");
  CHECK(r.num_decodes == 2);
  CHECK(r.logits_rows == "0 1 4");

  r = d.Step();
  CHECK(r.rows == "a@7+1 b@11+1 c@3+1 d@3+3");  // d's rest of prompt after the decodes
  CHECK(r.num_decodes == 3);
  CHECK(r.logits_rows == "0 1 2 5");

  d.Add("e", Text(41, 2));
  r = d.Step();
  CHECK(r.rows == "a@8+1 b@12+1 c@4+1 d@6+1");  // max_num_seqs: e waits
  CHECK(d.scheduler.num_waiting() == 1);
  d.scheduler.Remove("b");
  r = d.Step();
  CHECK(r.rows == "a@9+1 c@5+1 d@7+1 e@0+2");
  CHECK(r.num_decodes == 3);
}

TEST_CASE("chunked prefill: max_prefill_chunk caps every chunk and decodes never wait for it") {
  StepDriver d(Config(4, 16, 4), 32, 4, false);
  d.Add("a", Text(1, 10));
  d.Add("b", Text(21, 3));
  StepRecord r = d.Step();
  CHECK(r.rows == "a@0+4 b@0+3");
  CHECK(r.logits_rows == "6");
  r = d.Step();
  CHECK(r.rows == "b@3+1 a@4+4");
  CHECK(r.token_ids == "7 5 6 7 8");
  CHECK(r.positions == "3 4 5 6 7");
  r = d.Step();
  CHECK(r.rows == "b@4+1 a@8+2");
  CHECK(r.logits_rows == "0 2");
  r = d.Step();
  CHECK(r.rows == "a@10+1 b@5+1");  // both decode now, in admission order
  CHECK(r.num_decodes == 2);
}

TEST_CASE("prefix cache: full computed pages are reused, never the page of the last token") {
  StepDriver d(Config(4, 64), 32, 4, true);
  const std::vector<int32_t> p = Text(1, 10);
  Sequence* a = d.Add("a", p);
  CHECK(d.Step().rows == "a@0+10");

  Sequence* b = d.Add("b", Concat(Text(1, 8), {40, 41, 42}));
  StepRecord r = d.Step();
  CHECK(r.rows == "a@10+1 b@8+3");  // two shared pages
  CHECK(r.token_ids == "7 40 41 42");
  CHECK(d.scheduler.prefix_hit_tokens() == 8);
  CHECK(b->cached_prompt_tokens == 8);
  CHECK(b->block_table[0] == a->block_table[0]);
  CHECK(b->block_table[1] == a->block_table[1]);

  // The same 8 tokens exactly: the last page is recomputed so the step yields logits.
  Sequence* c = d.Add("c", Text(1, 8));
  r = d.Step();
  CHECK(r.rows == "a@11+1 b@11+1 c@4+4");
  CHECK(r.logits_rows == "0 1 5");
  CHECK(c->cached_prompt_tokens == 4);
  CHECK(d.scheduler.prefix_hit_tokens() == 12);
}

TEST_CASE("preemption when pages run out; the victim recomputes from the front of the queue") {
  StepDriver d(Config(4, 64), 4, 4, false);  // 16 token slots
  d.Add("a", Text(1, 6));
  Sequence* b = d.Add("b", Text(11, 6));
  CHECK(d.Step().rows == "a@0+6 b@0+6");
  CHECK(d.Step().rows == "a@6+1 b@6+1");
  CHECK(d.Step().rows == "a@7+1 b@7+1");
  CHECK(d.kv.num_free_pages() == 0);

  StepRecord r = d.Step();  // a's 9th token needs a third page: b, the newest, gives its two
  CHECK(r.rows == "a@8+1");
  CHECK(r.preempted == 1);
  CHECK(d.scheduler.total_preemptions() == 1);
  CHECK(b->num_computed == 0);
  CHECK(b->num_preemptions == 1);
  CHECK(d.scheduler.num_waiting() == 1);
  CHECK(d.Step().rows == "a@9+1");  // b needs 3 pages, 1 is free: it waits

  d.scheduler.Remove("a");
  r = d.Step();
  CHECK(r.rows == "b@0+9");  // prompt and generated tokens, recomputed
  CHECK(r.token_ids == Join(Concat(Text(11, 6), {kNext, kNext, kNext})));
  CHECK(r.logits_rows == "8");
  CHECK(d.kv.num_used_pages() == 3);

  // A sequence the whole pool cannot hold ends instead of blocking the queue.
  d.scheduler.Remove("b");
  d.Add("z", Text(1, 17));
  d.Add("y", Text(1, 3));
  r = d.Step();
  CHECK(r.out_of_capacity == std::vector<std::string>{"z"});
  CHECK(r.rows == "y@0+3");
}

TEST_CASE("encodes: planned once per media segment, shared within a step, skipped on hits") {
  StepDriver d(Config(4, 64), 64, 4, false);  // no prefix cache: only the encoder cache saves
  const MediaItem image = Media(false, {1, 4, 2}, 0.5f);  // 2 feature rows
  d.Add("a", {1, kImg, kImg, 2, 3}, {image});
  Sequence* b = d.Add("b", {4, 5, kImg, kImg}, {image});
  StepRecord r = d.Step();
  CHECK(r.encodes == std::vector<std::string>{"a#0<b#0"});
  CHECK(d.runner.encodes == 1);
  CHECK(d.cache.misses() == 1);
  CHECK(d.cache.hits() == 1);  // b's lookup, served once a's encode filled the cache
  CHECK(r.rows == "a@0+5 b@0+4");
  CHECK(r.media == std::vector<std::string>{"1+2@0", "7+2@0"});
  REQUIRE(r.media_features.size() == 2);
  CHECK(r.media_features[0] == r.media_features[1]);
  CHECK(b->features[0] == nullptr);  // dropped once its rows are computed

  d.Add("c", {6, kImg, kImg}, {image});
  r = d.Step();
  CHECK(r.encodes.empty());
  CHECK(r.rows == "a@5+1 b@4+1 c@0+3");
  CHECK(d.runner.encodes == 1);
  CHECK(d.cache.hits() == 2);

  d.Add("d", {kImg, kImg, 8}, {Media(false, {1, 4, 2}, 0.25f)});
  r = d.Step();
  CHECK(r.encodes == std::vector<std::string>{"d#0"});
  CHECK(d.runner.encodes == 2);
  CHECK(r.media == std::vector<std::string>{"3+2@0"});
}

TEST_CASE("encodes: the encoder budget stops a chunk before the segment that exceeds it") {
  StepDriver d(Config(4, 64, 0, 1), 64, 4, false);       // one feature row encoded per step
  const MediaItem video = Media(true, {3, 2, 2}, 0.1f);  // three one-row segments
  const std::vector<int32_t> prompt = {1, kVid, 2, kVid, 3, kVid, 4};
  d.Add("e", prompt, {video});
  StepRecord r = d.Step();
  CHECK(r.encodes == std::vector<std::string>{"e#0"});
  CHECK(r.rows == "e@0+3");
  r = d.Step();
  CHECK(r.encodes == std::vector<std::string>{"e#1"});
  CHECK(r.rows == "e@3+2");
  CHECK(r.media == std::vector<std::string>{"0+1@0"});
  r = d.Step();
  CHECK(r.encodes == std::vector<std::string>{"e#2"});
  CHECK(r.rows == "e@5+2");
  CHECK(r.logits_rows == "1");
  CHECK(d.runner.encodes == 3);

  d.Add("f", prompt, {video});  // every segment a hit: no budget taken, the whole prompt runs
  r = d.Step();
  CHECK(r.encodes.empty());
  CHECK(r.rows == "e@7+1 f@0+7");
  CHECK(r.media == std::vector<std::string>{"2+1@0", "4+1@0", "6+1@0"});
  CHECK(d.runner.encodes == 3);
  CHECK(d.cache.hits() == 3);
}

TEST_CASE("encodes: planned for a sequence that then gets no pages, the features wait for it") {
  StepDriver d(Config(4, 64), 3, 4, false);
  d.Add("a", Text(1, 8));
  Sequence* b = d.Add("b", Concat({kImg, kImg}, Text(11, 5)), {Media(false, {1, 4, 2}, 0.5f)});
  StepRecord r = d.Step();
  CHECK(r.encodes == std::vector<std::string>{"b#0"});
  CHECK(r.rows == "a@0+8");  // b needs 2 pages, 1 is free
  CHECK(d.runner.encodes == 1);
  CHECK(b->features[0] != nullptr);
  d.scheduler.Remove("a");
  r = d.Step();
  CHECK(r.encodes.empty());
  CHECK(r.rows == "b@0+7");
  CHECK(d.runner.encodes == 1);
  CHECK(d.cache.hits() == 0);  // held by the sequence, not looked up again
}

TEST_CASE("encodes: a sequence preempted after its encode was planned finds it in the cache") {
  StepDriver d(Config(4, 64, 4), 3, 4, false);
  d.Add("a", Text(1, 4));
  Sequence* s = d.Add("s", Concat(Concat(Text(11, 4), {kImg, kImg}), {20, 21}),
                      {Media(false, {1, 4, 2}, 0.5f)});
  CHECK(d.Step().rows == "a@0+4 s@0+4");
  // a's decode takes the last page; s's next chunk reaches the image (planned), then needs a
  // page: s, the newest, is preempted, and is admitted again for its first chunk.
  StepRecord r = d.Step();
  CHECK(r.encodes == std::vector<std::string>{"s#0"});
  CHECK(r.preempted == 1);
  CHECK(r.rows == "a@4+1 s@0+4");
  CHECK(d.runner.encodes == 1);
  CHECK(d.cache.entries() == 1);
  CHECK(s->features[0] == nullptr);
  d.scheduler.Remove("a");
  r = d.Step();
  CHECK(r.encodes.empty());
  CHECK(r.rows == "s@4+4");
  CHECK(r.media == std::vector<std::string>{"0+2@0"});
  CHECK(d.runner.encodes == 1);
  CHECK(d.cache.hits() == 1);
}

TEST_CASE("a failed encode finishes just the requests that need it, with its error") {
  StepDriver d(Config(8, 64), 32, 4, false);
  MediaItem bad = Media(false, {1, 4, 2}, 0.5f);
  bad.patches[5] = std::nanf("");
  d.Add("a", Text(1, 3));
  d.Add("b", {4, kImg, kImg}, {bad});
  d.Add("c", {5, kImg, kImg}, {Media(false, {1, 4, 2}, 0.75f)});
  d.Add("d", {6, 7, kImg, kImg}, {bad});  // the same content as b's: shares its encode
  StepRecord r = d.Step();
  CHECK(r.encodes == std::vector<std::string>{"b#0<d#0", "c#0"});
  CHECK(r.failed ==
        std::vector<std::string>{"b: non-finite pixel value", "d: non-finite pixel value"});
  CHECK(r.failed_codes ==
        std::vector<ErrorCode>{ErrorCode::kInvalidArgument, ErrorCode::kInvalidArgument});
  CHECK(r.rows == "a@0+3 c@0+3");
  CHECK(r.token_ids == Join({1, 2, 3, 5, kImg, kImg}));
  CHECK(r.media == std::vector<std::string>{"4+2@0"});
  CHECK(d.runner.encodes == 1);
  CHECK(d.scheduler.num_running() == 2);
  CHECK(d.scheduler.Find("b") == nullptr);
  CHECK(d.kv.num_used_pages() == 2);  // a's and c's only
  CHECK(d.Step().rows == "a@3+1 c@3+1");
}

TEST_CASE("abort: pages come back at once, running or waiting; ids and queue bounds") {
  SchedulerConfig cfg = Config(2, 64);
  cfg.max_waiting = 3;
  StepDriver d(cfg, 32, 4, false);
  d.Add("a", Text(1, 6));
  d.Add("b", Text(11, 9));
  d.Add("c", Text(21, 2));
  CHECK(d.Step().rows == "a@0+6 b@0+9");  // max_num_seqs 2: c waits
  CHECK(d.kv.num_used_pages() == 5);
  CHECK_THROWS_AS(d.Add("a", Text(1, 2)), Error);  // the id is in use
  d.Add("e", Text(31, 2));
  d.Add("g", Text(41, 2));
  try {
    d.Add("f", Text(1, 2));
    FAIL("a full waiting queue must refuse");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kResourceExhausted);
  }

  std::unique_ptr<Sequence> gone = d.scheduler.Remove("b");
  REQUIRE(gone != nullptr);
  CHECK(gone->block_table.empty());
  CHECK(d.kv.num_used_pages() == 2);
  CHECK(d.scheduler.Remove("b") == nullptr);
  CHECK(d.scheduler.Remove("e") != nullptr);  // waiting
  CHECK(d.scheduler.Remove("g") != nullptr);
  CHECK(d.scheduler.num_waiting() == 1);
  StepRecord r = d.Step();
  CHECK(r.rows == "a@6+1 c@0+2");
  d.scheduler.Remove("a");
  d.scheduler.Remove("c");
  CHECK(d.kv.num_used_pages() == 0);
  CHECK_FALSE(d.scheduler.has_work());
}

}  // namespace
}  // namespace m3::test
