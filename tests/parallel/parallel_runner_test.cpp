// Tensor / expert parallelism on the CPU (ranks are threads, InProcessCommunicator): for
// m3-tiny, m3-alt and the demo model, every (tp, ep) the model's shapes allow gives the greedy
// tokens of the single-rank runner and logits within 1e-5 relative L2 (float32, another
// summation order), through LoadModelRunner (a prompt with an image, then decodes) and through
// EngineCore (the golden / demo prompts with images and video batched on a tight page pool:
// chunked prefill, preemption, prefix-cache hits); parallel configs the model cannot take are
// refused naming the setting.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include "engine/parallel/in_process_communicator.h"
#include "engine/parallel/shard_plan.h"
#include "engine/runtime/engine_core.h"
#include "kernels/cpu/sampling.h"
#include "shared/error.h"
#include "shared/model_config.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/engine/golden_cases.h"
#include "tests/engine_server/engine_test_util.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

struct Parallel {
  int tp, ep;
};

std::unique_ptr<engine::ModelRunner> Load(const std::string& set, Parallel p) {
  engine::RunnerOptions o;
  o.tensor_parallel = p.tp;
  o.expert_parallel = p.ep;
  return engine::LoadModelRunner(DataPath(set + "/model"), o);
}

double RelL2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct Trace {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // every prompt row, then each decode
};

// One sequence: the prompt (media encoded by the runner, one span per placeholder row) in one
// step with every row's logits, then `decodes` greedy steps.
Trace RunPrompt(engine::ModelRunner& r, const engine::ModelInputs& in, int decodes) {
  const engine::RunnerInfo& info = r.info();
  const int64_t page = info.msa_block_size > 0 ? std::min<int64_t>(4, info.msa_block_size) : 4;
  const int64_t n = static_cast<int64_t>(in.input_ids.size());
  const int64_t pages = (n + decodes + page - 1) / page;
  r.AllocateKvCache(pages, page);
  engine::ForwardBatch b;
  for (int64_t i = 0; i < n; ++i) {
    b.token_ids.push_back(static_cast<int32_t>(in.input_ids[i]));
    b.positions.push_back(static_cast<int32_t>(i));
    b.slot_mapping.push_back(i);
    b.logits_rows.push_back(static_cast<int32_t>(i));
  }
  b.query_start = {0, static_cast<int32_t>(n)};
  b.context_lens = {0};
  b.max_pages_per_seq = static_cast<int32_t>(pages);
  for (int64_t p = 0; p < pages; ++p) b.block_tables.push_back(static_cast<int32_t>(p));
  for (bool video : {false, true}) {
    const auto& v = video ? in.videos : in.images;
    if (!v) continue;
    const int64_t token = video ? info.video_token_id : info.image_token_id;
    int64_t next = 0, item_patch = 0;
    for (const auto& grid : v->grids) {
      int64_t item_rows = 0;
      for (const engine::MediaSegment& s : r.SplitMedia(video, grid)) {
        auto f = r.Encode(v->pixels.data() + (item_patch + s.patch_offset) * info.patch_dim, s);
        for (int64_t i = 0; i < s.tokens; ++i) {
          while (next < n && in.input_ids[next] != token) ++next;
          REQUIRE(next < n);
          b.media.push_back({next++, 1, f, i});
        }
        item_rows += s.patch_rows;
      }
      item_patch += item_rows;
    }
  }
  Trace t;
  std::vector<float> logits;
  r.Execute(b, logits);
  const int64_t V = info.vocab_size;
  for (int64_t i = 0; i < n; ++i)
    t.logits.emplace_back(logits.begin() + i * V, logits.begin() + (i + 1) * V);
  for (int d = 0; d < decodes; ++d) {
    const int32_t tok = static_cast<int32_t>(kernels::cpu::ArgMax(t.logits.back().data(), V));
    t.tokens.push_back(tok);
    const int32_t pos = static_cast<int32_t>(n + d);
    b.token_ids = {tok};
    b.positions = {pos};
    b.slot_mapping = {pos};
    b.query_start = {0, 1};
    b.context_lens = {pos};
    b.num_decodes = 1;
    b.logits_rows = {0};
    b.media.clear();
    r.Execute(b, logits);
    t.logits.push_back(logits);
  }
  return t;
}

void CheckRunner(const std::string& set, const engine::ModelInputs& in, Parallel p) {
  CAPTURE(set);
  CAPTURE(p.tp);
  CAPTURE(p.ep);
  static std::map<std::string, Trace> single;
  if (!single.count(set)) single[set] = RunPrompt(*Load(set, {1, 1}), in, 4);
  const Trace& want = single[set];
  const Trace got = RunPrompt(*Load(set, p), in, 4);
  CHECK(got.tokens == want.tokens);
  REQUIRE(got.logits.size() == want.logits.size());
  double worst = 0;
  for (size_t i = 0; i < want.logits.size(); ++i)
    worst = std::max(worst, RelL2(got.logits[i], want.logits[i]));
  std::printf("  %s tp %d ep %d: %zu logits rows, worst relative L2 %.2e\n", set.c_str(), p.tp,
              p.ep, want.logits.size(), worst);
  CHECK(worst <= 1e-5);
}

std::vector<engine::MediaItem> Media(const std::optional<engine::VisionInput>& v, bool video) {
  std::vector<engine::MediaItem> out;
  if (!v) return out;
  int64_t row = 0;
  for (const auto& g : v->grids) {
    engine::MediaItem m;
    m.video = video;
    m.grid_thw = g;
    m.placeholder_tokens = g[0] * g[1] * g[2] / 4;
    m.patch_dim = v->patch_dim;
    const int64_t rows = g[0] * g[1] * g[2];
    m.patches.assign(v->pixels.begin() + row * v->patch_dim,
                     v->pixels.begin() + (row + rows) * v->patch_dim);
    row += rows;
    out.push_back(std::move(m));
  }
  return out;
}

engine::EngineRequest Request(const std::string& id, const engine::ModelInputs& in,
                              const engine::RunnerInfo& info) {
  engine::EngineRequest r;
  r.id = id;
  r.prompt.assign(in.input_ids.begin(), in.input_ids.end());
  r.media = Media(in.images, false);
  for (auto& m : Media(in.videos, true)) r.media.push_back(std::move(m));
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 8;
  r.sampling.return_logprobs = true;
  for (int64_t e : info.eos_token_ids) r.sampling.eos_token_ids.push_back(static_cast<int32_t>(e));
  return r;
}

void WaitIdle(const engine::EngineCore& e) {
  for (int i = 0; i < 5000 && (!e.Idle() || e.Stats().running || e.Stats().waiting); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// The prompts alone on a single rank, then batched twice (the second round hits the prefix
// cache) on the parallel runner with a pool that holds only the longest request: preemption.
void CheckEngine(const std::string& set, const std::vector<engine::ModelInputs>& prompts,
                 Parallel p) {
  CAPTURE(set);
  CAPTURE(p.tp);
  CAPTURE(p.ep);
  const int64_t page = 4;
  engine::EngineConfig cfg;
  cfg.page_size = page;
  cfg.kv_pages = 512;
  engine::EngineCore alone(Load(set, {1, 1}), cfg);
  std::vector<engine::EngineRequest> reqs;
  int64_t longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    reqs.push_back(Request("r" + std::to_string(i), prompts[i], alone.info()));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts[i].input_ids.size()) + 8);
  }
  Collector want_col;
  std::map<std::string, Collected> want;
  for (const auto& r : reqs) {
    alone.Submit(r, want_col.Sink(r.id));
    want[r.id] = want_col.Wait(r.id);
  }
  engine::EngineConfig tight = cfg;
  tight.kv_pages = (longest + page - 1) / page + 2;
  tight.scheduler.max_prefill_chunk = 24;
  tight.scheduler.max_batched_tokens = 64;
  engine::EngineCore par(Load(set, p), tight);
  double worst = 0;
  for (int round = 0; round < 2; ++round) {
    Collector col;
    for (const auto& r : reqs) par.Submit(r, col.Sink(r.id));
    for (const auto& r : reqs) {
      CAPTURE(r.id);
      const Collected got = col.Wait(r.id);
      CHECK(got.error == "");
      CHECK(got.tokens == want.at(r.id).tokens);
      const auto& lp = want.at(r.id).logprobs;
      REQUIRE(got.logprobs.size() == lp.size());
      for (size_t i = 0; i < lp.size(); ++i)
        worst = std::max(worst, static_cast<double>(std::abs(got.logprobs[i] - lp[i])));
    }
  }
  WaitIdle(par);
  const engine::EngineStats s = par.Stats();
  std::printf(
      "  %s tp %d ep %d engine: %zu requests x 2 rounds, %lld preemptions, %lld prefix-hit "
      "tokens, worst logprob difference %.2e\n",
      set.c_str(), p.tp, p.ep, reqs.size(), static_cast<long long>(s.preemptions),
      static_cast<long long>(s.prefix_hit_tokens), worst);
  CHECK(s.preemptions > 0);
  CHECK(s.prefix_hit_tokens > 0);
  CHECK(s.kv_pages_used == 0);
  CHECK(worst <= 1e-4);
}

std::vector<engine::ModelInputs> GoldenPrompts(const std::string& set) {
  const GoldenSet& g = Golden(set);
  return {g.Inputs("text"), g.Inputs("image"), g.Inputs("image2"), g.Inputs("video")};
}

std::vector<engine::ModelInputs> DemoInputs() {
  std::vector<engine::ModelInputs> out;
  for (const DemoPrompt& p : DemoPrompts()) out.push_back(p.inputs);
  return out;
}

TEST_CASE("m3-tiny: tp 2, ep 2, tp 2 + ep 2, tp 4, ep 4 equal the single rank") {
  const engine::ModelInputs image = Golden("m3-tiny").Inputs("image");
  for (Parallel p : {Parallel{2, 1}, Parallel{1, 2}, Parallel{2, 2}, Parallel{4, 1}, Parallel{1, 4},
                     Parallel{4, 4}})
    CheckRunner("m3-tiny", image, p);
  for (Parallel p : {Parallel{2, 1}, Parallel{1, 2}, Parallel{2, 2}})
    CheckEngine("m3-tiny", GoldenPrompts("m3-tiny"), p);
}

TEST_CASE("m3-alt (3 KV heads, 6 experts): ep 2 equals the single rank; tp 2 is refused") {
  CheckRunner("m3-alt", Golden("m3-alt").Inputs("image"), {1, 2});
  CheckEngine("m3-alt", GoldenPrompts("m3-alt"), {1, 2});
}

TEST_CASE("demo model: tp 2, ep 2, tp 2 + ep 2 equal the single rank") {
  const std::vector<engine::ModelInputs> prompts = DemoInputs();
  for (Parallel p : {Parallel{2, 1}, Parallel{1, 2}, Parallel{2, 2}}) {
    CheckRunner("demo-model", prompts.back(), p);
    CheckEngine("demo-model", prompts, p);
  }
}

void CheckRefused(const std::string& set, Parallel p, const std::string& needle,
                  ErrorCode code = ErrorCode::kInvalidArgument) {
  CAPTURE(set);
  CAPTURE(p.tp);
  CAPTURE(p.ep);
  try {
    Load(set, p);
    FAIL("loaded");
  } catch (const Error& e) {
    CHECK(e.code() == code);
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

TEST_CASE("parallel configs the model cannot take are refused by name") {
  CheckRefused("m3-tiny", {3, 1}, "num_attention_heads 4");
  CheckRefused("m3-tiny", {0, 1}, "tensor parallel size must be >= 1");
  CheckRefused("m3-tiny", {1, -1}, "expert parallel size must be >= 1");
  CheckRefused("m3-tiny", {2, 4}, "must be equal");
  CheckRefused("m3-tiny", {1, 3}, "num_local_experts 8");
  CheckRefused("m3-tiny", {8, 1}, "num_attention_heads 4");
  CheckRefused("m3-alt", {2, 1}, "num_key_value_heads 3");
  CheckRefused("m3-alt", {1, 4}, "num_local_experts 6");
  CheckRefused("m3-alt", {1, 3}, "dense_intermediate_size 80");
  // ShardPlan directly: the ranges of a rank.
  const ModelConfig c = LoadModelConfig(DataPath("m3-tiny/model"));
  const engine::parallel::ShardPlan r3 = engine::parallel::MakeShardPlan(c.text, 4, 4, 3);
  CHECK(r3.q_heads.first == 3);
  CHECK(r3.q_heads.count == 1);
  CHECK(r3.kv_heads.first == 1);  // 4 ranks, 2 KV heads: ranks 2 and 3 keep KV head 1
  CHECK(r3.kv_heads.count == 1);
  CHECK(r3.experts.first == 6);
  CHECK(r3.experts.count == 2);
  CHECK(r3.expert_inter.count == c.text.intermediate_size);
  const engine::parallel::ShardPlan t1 = engine::parallel::MakeShardPlan(c.text, 2, 1, 1);
  CHECK(t1.experts.count == c.text.num_local_experts);
  CHECK(t1.expert_inter.first == c.text.intermediate_size / 2);
}

TEST_CASE("m3-engine serve refuses bad --tensor-parallel / --expert-parallel with a message") {
  struct Bad {
    std::vector<std::string> flags;
    std::string needle;
  };
  const Bad cases[] = {
      {{"--tensor-parallel", "3"}, "num_attention_heads 4"},
      {{"--tensor-parallel", "0"}, "--tensor-parallel must be in [1, 64]"},
      {{"--expert-parallel", "x"}, "expert-parallel"},
      {{"--tensor-parallel", "2", "--expert-parallel", "4"}, "must be equal"},
      {{"--expert-parallel", "3"}, "num_local_experts 8"},
      {{"--device", "cuda", "--tensor-parallel", "2"}, "tensor parallel 2 / expert parallel 1 on cuda: "},
  };
  for (const Bad& b : cases) {
    std::vector<std::string> argv = {BinPath("m3-engine"),      "serve",  "--model",
                                     DataPath("m3-tiny/model"), "--port", "0"};
    argv.insert(argv.end(), b.flags.begin(), b.flags.end());
    const ProcessResult r = RunProcess(argv);
    CAPTURE(r.err);
    if (r.err.find("without gRPC") != std::string::npos) return;  // no serve in this build
    CHECK(r.exit_code != 0);
    CHECK(r.err.find(b.needle) != std::string::npos);
  }
}

TEST_CASE("in-process AllReduce: rank-ordered float32 sum, bf16, mismatched shapes refused") {
  constexpr int kRanks = 3;
  auto group = std::make_shared<engine::parallel::InProcessGroup>(kRanks);
  std::vector<std::vector<float>> data(kRanks);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      engine::parallel::InProcessCommunicator comm(group, r);
      struct Buf : engine::backend::DeviceBuffer {
        std::vector<float>* v;
        void* data() override { return v->data(); }
        size_t bytes() const override { return v->size() * 4; }
      };
      data[r].resize(1001);
      for (size_t i = 0; i < data[r].size(); ++i)
        data[r][i] = 1e8f * (r == 0) + float(r + i) * 0.25f;
      auto buf = std::make_shared<Buf>();
      buf->v = &data[r];
      engine::backend::DeviceTensor t{buf, 0, DType::kF32, {1001}};
      comm.AllReduceSum(t);
      engine::backend::DeviceTensor small{buf, 0, DType::kF32, {static_cast<int64_t>(10 + r)}};
      try {
        comm.AllReduceSum(small);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
      comm.Barrier();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    CHECK(errors[r].find("different shapes") != std::string::npos);
    for (size_t i = 0; i < 1001; ++i) {
      // (rank 0 + rank 1) + rank 2 in float32, whatever the threads' timing.
      const float want = (1e8f + float(i) * 0.25f + float(1 + i) * 0.25f) + float(2 + i) * 0.25f;
      REQUIRE(data[r][i] == want);
    }
  }
}

}  // namespace
}  // namespace m3::test
