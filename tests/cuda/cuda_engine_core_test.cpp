// The serving runtime (EngineCore: scheduler, paged KV cache, prefix cache, encoder cache) on
// the CUDA runner, as `m3-engine serve --device cuda` runs it: the KV cache sized from the GPU
// memory left after the weights; greedy completions of the demo prompts equal to the CPU
// engine's; batched with preemption and prefix-cache hits equal to each request alone; requests
// and settings that cannot fit refused with a clear error.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "engine/backend/make_device.h"
#include "engine/minimax_m3/m3_memory_plan.h"
#include "engine/model_registry.h"
#include "engine/runtime/engine_core.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::EngineConfig;
using engine::EngineCore;
using engine::EngineRequest;

struct Done {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  engine::FinishReason finish = engine::FinishReason::kNone;
  std::string error;
  int64_t cached = 0;
};

class Outputs {
 public:
  engine::OutputSink Sink(const std::string& id) {
    return [this, id](engine::RequestOutput&& o) {
      std::lock_guard<std::mutex> lock(mu_);
      Done& d = got_[id];
      d.tokens.insert(d.tokens.end(), o.tokens.begin(), o.tokens.end());
      for (const auto& l : o.logprobs) d.logprobs.push_back(l.logprob);
      if (o.finish != engine::FinishReason::kNone) {
        d.finish = o.finish;
        d.error = o.error;
        d.cached = o.cached_prompt_tokens;
        cv_.notify_all();
      }
    };
  }
  Done Wait(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] {
      auto it = got_.find(id);
      return it != got_.end() && it->second.finish != engine::FinishReason::kNone;
    });
    return got_[id];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Done> got_;
};

std::vector<EngineRequest> Requests(const EngineCore& core) {
  std::vector<EngineRequest> out;
  for (const DemoPrompt& p : DemoPrompts()) {
    EngineRequest r;
    r.id = p.name;
    r.prompt.assign(p.inputs.input_ids.begin(), p.inputs.input_ids.end());
    r.media = MediaItems(p.inputs);
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 16;
    r.sampling.return_logprobs = true;
    for (int64_t e : core.info().eos_token_ids)
      r.sampling.eos_token_ids.push_back(static_cast<int32_t>(e));
    out.push_back(std::move(r));
  }
  return out;
}

std::unique_ptr<EngineCore> Core(const std::string& device, EngineConfig cfg) {
  engine::RunnerOptions ro;
  ro.device = device;
  return std::make_unique<EngineCore>(engine::LoadModelRunner(DataPath("demo-model/model"), ro),
                                      cfg);
}

std::map<std::string, Done> RunAlone(EngineCore& core, const std::vector<EngineRequest>& reqs) {
  Outputs out;
  std::map<std::string, Done> got;
  for (const auto& r : reqs) {
    core.Submit(r, out.Sink(r.id));
    got[r.id] = out.Wait(r.id);
  }
  return got;
}

void WaitIdle(const EngineCore& e) {
  for (int i = 0; i < 5000 && (!e.Idle() || e.Stats().running || e.Stats().waiting); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST_CASE("GPU serving runtime: KV sized from free memory, CPU-equal, batched equals alone") {
  // KV sizing: a fraction that leaves 1 GiB beyond what is in use once the weights are loaded.
  engine::RunnerOptions ro;
  ro.device = "cuda";
  auto runner = engine::LoadModelRunner(DataPath("demo-model/model"), ro);
  const engine::backend::DeviceMemory m = engine::backend::QueryDeviceMemory("cuda");
  REQUIRE(m.total_bytes > 0);
  const int64_t used = m.total_bytes - m.free_bytes;
  const double fraction =
      static_cast<double>(used + (int64_t{1} << 30)) / static_cast<double>(m.total_bytes);
  const int64_t per_page = runner->KvBytesPerPage(16);
  EngineConfig cfg;
  cfg.gpu_memory_fraction = fraction;
  cfg.page_size = 16;
  EngineCore gpu(std::move(runner), cfg);
  const int64_t want_pages =
      (static_cast<int64_t>(fraction * static_cast<double>(m.total_bytes)) - used) / per_page;
  std::printf(
      "  cuda engine: %lld MiB in use after the weights, fraction %.4f: %lld KV pages "
      "(%lld expected, %lld bytes each)\n",
      static_cast<long long>(used >> 20), fraction, static_cast<long long>(gpu.Stats().kv_pages),
      static_cast<long long>(want_pages), static_cast<long long>(per_page));
  // Other processes may allocate meanwhile; this engine's own snapshot is a moment later, and
  // the KV pages leave room for the step workspace (reserved before they are counted).
  CHECK(gpu.Stats().kv_pages <= want_pages + 1);
  CHECK(gpu.Stats().kv_pages >= want_pages * 3 / 4);

  const std::vector<EngineRequest> reqs = Requests(gpu);
  const auto alone = RunAlone(gpu, reqs);

  EngineConfig ccfg;
  ccfg.kv_pages = 256;
  ccfg.page_size = 16;
  auto cpu = Core("cpu", ccfg);
  const auto on_cpu = RunAlone(*cpu, reqs);
  double worst_lp = 0;
  for (const auto& r : reqs) {
    CAPTURE(r.id);
    const Done &g = alone.at(r.id), &c = on_cpu.at(r.id);
    CHECK(g.error == "");
    CHECK(g.tokens == c.tokens);
    for (size_t i = 0; i < std::min(g.logprobs.size(), c.logprobs.size()); ++i)
      worst_lp = std::max(worst_lp, static_cast<double>(std::abs(g.logprobs[i] - c.logprobs[i])));
  }
  std::printf(
      "  cuda engine: demo completions equal to the CPU engine's; worst chosen-token "
      "logprob difference %.3e\n",
      worst_lp);

  // Batched: the requests at once on tight pools of small pages (decodes outgrow them:
  // preemption), twice over so the second round hits the prefix cache, chunked prefill. Each
  // pool holds the longest request it gets alone (prompt + 16 tokens).
  struct Pool {
    int64_t pages, page_size;
    size_t requests;  // the first n of reqs: 3 texts, image, image2, video (145 tokens)
  };
  int64_t preemptions = 0, prefix_hits = 0;
  double worst_batched_lp = 0;
  std::unique_ptr<EngineCore> batched;
  for (const Pool& pool : {Pool{40, 4, 6}, Pool{30, 4, 5}, Pool{56, 2, 3}}) {
    CAPTURE(pool.pages);
    EngineConfig tight;
    tight.kv_pages = pool.pages;
    tight.page_size = pool.page_size;
    tight.scheduler.max_prefill_chunk = 48;
    tight.scheduler.max_batched_tokens = 160;
    batched = Core("cuda", tight);
    const std::vector<EngineRequest> some(reqs.begin(), reqs.begin() + pool.requests);
    for (int round = 0; round < 2; ++round) {
      Outputs out;
      // All at once: the pools are tight only for requests that run together.
      std::vector<std::pair<EngineRequest, engine::OutputSink>> batch;
      for (const auto& r : some) batch.emplace_back(r, out.Sink(r.id));
      batched->SubmitAll(std::move(batch));
      for (const auto& r : some) {
        CAPTURE(r.id);
        const Done got = out.Wait(r.id);
        CHECK(got.error == "");
        CHECK(got.tokens == alone.at(r.id).tokens);
        const auto& want = alone.at(r.id).logprobs;
        for (size_t i = 0; i < std::min(got.logprobs.size(), want.size()); ++i)
          worst_batched_lp =
              std::max(worst_batched_lp, static_cast<double>(std::abs(got.logprobs[i] - want[i])));
      }
      WaitIdle(*batched);
    }
    const engine::EngineStats s = batched->Stats();
    CHECK(s.kv_pages_used == 0);
    std::printf(
        "  cuda engine batched (%lld pages of %lld, %zu requests): %lld preemptions, %lld "
        "prefix-hit tokens\n",
        static_cast<long long>(pool.pages), static_cast<long long>(pool.page_size), pool.requests,
        static_cast<long long>(s.preemptions), static_cast<long long>(s.prefix_hit_tokens));
    preemptions += s.preemptions;
    prefix_hits += s.prefix_hit_tokens;
  }
  std::printf("  cuda engine batched: worst chosen-token logprob difference to alone %.3e\n",
              worst_batched_lp);
  CHECK(preemptions > 0);
  CHECK(prefix_hits > 0);
  CHECK(worst_batched_lp <= 5e-2);

  // A prompt longer than the pool holds (the video's 129 tokens in 56 pages of 2) is refused by
  // name, and the engine goes on serving.
  Outputs out;
  CHECK_THROWS_WITH_AS(batched->Submit(reqs[5], out.Sink(reqs[5].id)), doctest::Contains("at most"),
                       Error);
  batched->Submit(reqs[0], out.Sink(reqs[0].id));
  CHECK(out.Wait(reqs[0].id).tokens == alone.at(reqs[0].id).tokens);
}

TEST_CASE("GPU serving runtime: a memory fraction that leaves no KV room is a clear error") {
  engine::RunnerOptions ro;
  ro.device = "cuda";
  auto runner = engine::LoadModelRunner(DataPath("demo-model/model"), ro);
  const engine::backend::DeviceMemory m = engine::backend::QueryDeviceMemory("cuda");
  EngineConfig cfg;
  cfg.gpu_memory_fraction =
      0.5 * static_cast<double>(m.total_bytes - m.free_bytes) / static_cast<double>(m.total_bytes);
  try {
    EngineCore core(std::move(runner), cfg);
    FAIL("an engine without KV room started");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kResourceExhausted);
    CHECK(std::string(e.what()).find("leaves no room for the KV cache") != std::string::npos);
  }
}

TEST_CASE("GPU memory: weights that cannot fit are refused before loading, with the numbers") {
  const engine::backend::DeviceMemory m = engine::backend::QueryDeviceMemory("cuda");
  REQUIRE(m.total_bytes > 0);
  engine::minimax_m3::CheckWeightsFit({"cuda"}, {int64_t{1} << 20});  // 1 MiB fits
  try {
    engine::minimax_m3::CheckWeightsFit({"cuda", "cuda"},
                                        {int64_t{1} << 20, m.free_bytes + (int64_t{8} << 30)});
    FAIL("weights larger than the free memory were accepted");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(e.code() == ErrorCode::kResourceExhausted);
    CHECK(what.find("rank 1 on cuda: weights need") != std::string::npos);
    CHECK(what.find("does not fit") != std::string::npos);
    CHECK(what.find("free of") != std::string::npos);
  }
}

}  // namespace
}  // namespace m3::test
