// Speculative decoding on the CUDA runner: the verify forward (a sequence carrying its last
// token and k drafts as 1 + k query rows, logits at each, MSA block selection per row under
// causality, beside a plain decode in the same batch) against the same rows decoded one at a
// time on the GPU and against the CPU engine; and the engine loop with n-gram speculation giving
// the greedy tokens of plain decoding, batched, through preemption, pages all given back.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "engine/model_registry.h"
#include "engine/runtime/engine_core.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/cuda/paged_sequences.h"
#include "tests/engine/golden_cases.h"
#include "tests/engine/selection_run.h"
#include "tests/runtime/verify_forward.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::EngineConfig;
using engine::EngineCore;
using engine::EngineRequest;

class Outputs {
 public:
  engine::OutputSink Sink(const std::string& id) {
    return [this, id](engine::RequestOutput&& o) {
      std::lock_guard<std::mutex> lock(mu_);
      auto& d = got_[id];
      d.first.insert(d.first.end(), o.tokens.begin(), o.tokens.end());
      if (o.finish != engine::FinishReason::kNone) {
        d.second = true;
        if (o.finish == engine::FinishReason::kError) errors_.push_back(o.error);
        cv_.notify_all();
      }
    };
  }
  std::vector<int32_t> Wait(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return got_[id].second; });
    return got_[id].first;
  }
  std::vector<std::string> errors() {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::pair<std::vector<int32_t>, bool>> got_;
  std::vector<std::string> errors_;
};

struct EngineRun {
  std::map<std::string, std::vector<int32_t>> tokens;
  engine::EngineStats stats;
};

EngineRun RunEngine(const std::string& device, EngineConfig cfg,
                    const std::vector<EngineRequest>& reqs) {
  engine::RunnerOptions ro;
  ro.device = device;
  // Verify steps sample 1 + k rows a sequence (and replay graphs only where sized for them).
  if (cfg.speculative.enabled()) ro.max_logits_per_seq = 1 + cfg.speculative.num_speculative_tokens;
  if (cfg.speculative.method == engine::spec::SpeculativeMethod::kEagle3)
    ro.draft_hidden_layers = 3;
  EngineCore core(engine::LoadModelRunner(DataPath("demo-model/model"), ro), cfg);
  Outputs out;
  std::vector<std::pair<EngineRequest, engine::OutputSink>> batch;
  for (const auto& r : reqs) batch.emplace_back(r, out.Sink(r.id));
  core.SubmitAll(std::move(batch));
  EngineRun run;
  for (const auto& r : reqs) run.tokens[r.id] = out.Wait(r.id);
  for (int i = 0; i < 5000 && (!core.Idle() || core.Stats().running); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(out.errors().empty());
  run.stats = core.Stats();
  CHECK(run.stats.kv_pages_used == 0);
  return run;
}

}  // namespace

TEST_CASE(
    "GPU verify forward: 1 + k rows per sequence equal decoding them one by one, and the CPU") {
  const VerifyRun gpu = RunVerify("cuda");
  const VerifyRun cpu = RunVerify("cpu");
  double worst_seq = 0, worst_cpu = 0;
  for (int32_t j = 0; j <= kVerifyDrafts; ++j) {
    CAPTURE(j);
    const auto& g = gpu.verify[static_cast<size_t>(j)];
    worst_seq = std::max(worst_seq, RelativeL2(g, gpu.sequential[static_cast<size_t>(j)]));
    worst_cpu = std::max(worst_cpu, RelativeL2(g, cpu.verify[static_cast<size_t>(j)]));
    // The CPU engine's verify rows equal its own sequential decodes (float32).
    CHECK(RelativeL2(cpu.verify[static_cast<size_t>(j)], cpu.sequential[static_cast<size_t>(j)]) <=
          1e-4);
    CHECK(Argmax(g) == Argmax(cpu.verify[static_cast<size_t>(j)]));
  }
  const double decode_cpu = RelativeL2(gpu.decode, cpu.decode);
  // Each verify row's MSA blocks, selected under its own causal limit: the GPU's as the CPU's
  // but where bf16 rounding reorders blocks of near-equal scores (H200, 2026-11-28: 2 of 90
  // entries; at most 2% or two entries, whichever is more, since a sample this small is all
  // near-ties or none).
  const auto [entries, differing] = CompareSelections(gpu.selections, cpu.selections);
  std::printf("  cuda verify step: %lld of %lld MSA selection entries differ from the CPU's\n",
              static_cast<long long>(differing), static_cast<long long>(entries));
  CHECK(entries > 0);
  CHECK(differing <= std::max<int64_t>(2, entries / 50));
  std::printf(
      "  cuda verify rows (1 + %d at context %zu): rel L2 vs one-by-one decodes %.3e, vs the "
      "CPU %.3e; the decode beside them vs the CPU %.3e\n",
      kVerifyDrafts, kVerifyContext.size(), worst_seq, worst_cpu, decode_cpu);
  CHECK(worst_seq <= 2e-2);
  CHECK(worst_cpu <= 2e-2);
  CHECK(decode_cpu <= 2e-2);
}

TEST_CASE("GPU verify steps replay recorded graphs equal to running them op by op") {
  const BucketRun eager = RunUniformVerify("cuda", false, false);
  const BucketRun padded = RunUniformVerify("cuda", true, false);
  const BucketRun graph = RunUniformVerify("cuda", true, true);
  CHECK(padded.bucket_steps == 1);
  CHECK(graph.recorded == 1);
  CHECK(graph.bucket_steps == 1);
  const double graph_vs_padded = RelativeL2(graph.logits, padded.logits);
  const double padded_vs_eager = RelativeL2(padded.logits, eager.logits);
  std::printf(
      "  cuda verify graph (3 sequences x 1 + %d rows): rel L2 graph vs op by op at the bucket "
      "shape %.3e, bucket shape vs the step's own %.3e\n",
      kVerifyDrafts, graph_vs_padded, padded_vs_eager);
  CHECK(graph_vs_padded <= 1e-6);
  CHECK(padded_vs_eager <= 2e-2);
  // With an EAGLE-3 draft's capture (the inputs of layers 1, 2, 3), kept inside the graph.
  const BucketRun kept = RunUniformVerify("cuda", true, true, true);
  const BucketRun eager_kept = RunUniformVerify("cuda", false, false, true);
  CHECK(kept.recorded == 1);
  REQUIRE(kept.hidden.size() == 3);
  REQUIRE(eager_kept.hidden.size() == 3);
  double worst = 0;
  for (size_t i = 0; i < 3; ++i) {
    CHECK(kept.hidden[i].first == eager_kept.hidden[i].first);
    worst = std::max(worst, RelativeL2(kept.hidden[i].second.as<float>(),
                                       eager_kept.hidden[i].second.as<float>()));
  }
  std::printf("  cuda verify graph keeping 3 layer inputs: rel L2 vs the op-by-op capture %.3e\n",
              worst);
  CHECK(worst <= 2e-2);
  CHECK(RelativeL2(kept.logits, graph.logits) <= 1e-6);
}

TEST_CASE("GPU engine with n-gram / EAGLE-3 speculation: the greedy tokens of plain decoding") {
  std::vector<EngineRequest> reqs;
  int i = 0;
  for (const DemoPrompt& p : DemoPrompts()) {
    EngineRequest r;
    r.id = p.name;
    r.prompt.assign(p.inputs.input_ids.begin(), p.inputs.input_ids.end());
    r.media = MediaItems(p.inputs);
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 32 + 5 * i++;
    r.sampling.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  int64_t accepted = 0, preemptions = 0;
  for (int64_t pages : {int64_t{256}, int64_t{24}}) {
    CAPTURE(pages);
    EngineConfig cfg;
    cfg.kv_pages = pages;
    cfg.page_size = 16;
    cfg.prefix_caching = pages > 100;
    const EngineRun plain = RunEngine("cuda", cfg, reqs);
    cfg.speculative.method = engine::spec::SpeculativeMethod::kNgram;
    cfg.speculative.num_speculative_tokens = 3;
    cfg.speculative.backoff = false;
    // Uniform drafts: every verify step runs as a replayed graph of its bucket; otherwise steps
    // mixing verifies and plain decodes run op by op. The trained EAGLE-3 draft: its drafts
    // from the captured hidden states (steps op by op).
    for (const char* mode : {"ngram", "ngram uniform", "eagle3"}) {
      CAPTURE(mode);
      EngineConfig sc = cfg;
      sc.speculative.uniform_drafts = std::string(mode) == "ngram uniform";
      if (std::string(mode) == "eagle3") {
        sc.speculative.method = engine::spec::SpeculativeMethod::kEagle3;
        sc.speculative.model_dir = DataPath("demo-model/eagle3");
        sc.speculative.target_model_dir = DataPath("demo-model/model");
      }
      const EngineRun spec = RunEngine("cuda", sc, reqs);
      for (const auto& r : reqs) {
        CAPTURE(r.id);
        CHECK(spec.tokens.at(r.id) == plain.tokens.at(r.id));
      }
      std::printf(
          "  cuda engine, %lld pages, %s k=3: accepted %lld of %lld drafts in %lld verifies; "
          "%lld steps (plain %lld), %lld preemptions\n",
          static_cast<long long>(pages), mode, static_cast<long long>(spec.stats.spec_accepted),
          static_cast<long long>(spec.stats.spec_proposed),
          static_cast<long long>(spec.stats.spec_steps), static_cast<long long>(spec.stats.steps),
          static_cast<long long>(plain.stats.steps),
          static_cast<long long>(spec.stats.preemptions));
      accepted += spec.stats.spec_accepted;
      preemptions += spec.stats.preemptions;
    }
  }
  CHECK(accepted > 0);
  CHECK(preemptions > 0);
}

}  // namespace m3::test
