// Decode steps under CUDA graphs against the same steps op by op, on the GPU: the decoder graph
// with recorded decode graphs gives the same logits (within 1e-6 relative) as one without,
// for the demo model and m3-tiny, at batch sizes inside and between the row buckets (padded
// rows), block tables of several widths, sequences joining and leaving; and the serving runtime
// (EngineCore) with graphs on gives the tokens and logprobs it gives with graphs off, with
// preemption and prefix-cache hits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>

#include "engine/backend/make_backend.h"
#include "engine/minimax_m3/m3_decoder_graph.h"
#include "engine/minimax_m3/m3_model_weights.h"
#include "engine/runtime/engine_core.h"
#include "shared/model_config.h"
#include "shared/safetensors.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::minimax_m3::M3DecoderGraph;

// One model on its own backend (each backend has one step workspace, which a decoder graph
// sizes for itself).
struct Decoder {
  ModelConfig config;
  std::unique_ptr<engine::backend::Backend> be;
  engine::minimax_m3::M3ModelWeights weights;
  std::unique_ptr<M3DecoderGraph> graph;
  Decoder(const std::string& dir, bool graphs, int64_t pages, int64_t page_size) {
    config = LoadModelConfig(dir);
    be = engine::backend::MakeBackend("cuda");
    engine::LoadReport report;
    weights = engine::minimax_m3::LoadM3ModelWeights(WeightStore::OpenDirectory(dir), config, *be,
                                                     report);
    engine::minimax_m3::DecoderStepLimits limits;
    limits.max_num_seqs = 16;
    limits.max_batched_tokens = 256;
    limits.graphs = graphs;
    graph = std::make_unique<M3DecoderGraph>(config, weights, *be, limits);
    graph->AllocateKvCache(pages, page_size);
  }
};

struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pages;
  int32_t cached = 0;
};

// One step over `seqs` (decodes first), each running its uncached tokens; the table is
// `width` pages wide (at least what the longest needs).
engine::ForwardBatch Batch(const std::vector<Seq*>& seqs, int64_t page, int32_t width) {
  engine::ForwardBatch b;
  b.query_start.push_back(0);
  b.max_pages_per_seq = width;
  for (const Seq* s : seqs) {
    const int32_t n = static_cast<int32_t>(s->tokens.size()) - s->cached;
    if (n == 1 && b.query_start.size() - 1 == static_cast<size_t>(b.num_decodes)) ++b.num_decodes;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t pos = s->cached + i;
      b.token_ids.push_back(s->tokens[pos]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(int64_t{s->pages[pos / page]} * page + pos % page);
    }
    b.context_lens.push_back(s->cached);
    b.query_start.push_back(b.query_start.back() + n);
    b.logits_rows.push_back(b.query_start.back() - 1);
    std::vector<int32_t> table(width, -1);
    std::copy(s->pages.begin(), s->pages.end(), table.begin());
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
  }
  return b;
}

void CheckDecodeGraphs(const std::string& set, int64_t page) {
  const std::string dir = DataPath(set + "/model");
  const int64_t pages = 512;
  Decoder eager(dir, false, pages, page), graphed(dir, true, pages, page);
  REQUIRE(graphed.graph->decode_graphs() != nullptr);
  REQUIRE(eager.graph->decode_graphs() == nullptr);
  const int64_t V = eager.config.text.vocab_size;
  std::mt19937 rng(7);
  // 13 sequences with prompts of 5..60 tokens on interleaved pages; they join in waves so
  // decode batches take sizes 1, 3, 5, 8, 13 (between buckets: padded rows).
  std::vector<Seq> seqs(13);
  int32_t next_page = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int len = 5 + static_cast<int>(rng() % 56);
    for (int j = 0; j < len; ++j) seqs[i].tokens.push_back(static_cast<int32_t>(rng() % (V - 16)));
  }
  auto grow_pages = [&](Seq& s) {
    while (static_cast<int64_t>(s.pages.size()) * page < static_cast<int64_t>(s.tokens.size()))
      s.pages.push_back(next_page++);
  };
  double worst = 0, worst_rel = 0;
  int64_t steps = 0, decode_steps = 0;
  std::vector<Seq*> live;
  auto run = [&](const std::vector<Seq*>& batch_seqs, int32_t width) {
    const engine::ForwardBatch b = Batch(batch_seqs, page, width);
    std::vector<float> a, g;
    const engine::CaptureRequest none;
    eager.graph->Execute(b, a, none);
    graphed.graph->Execute(b, g, none);
    REQUIRE(a.size() == g.size());
    for (size_t i = 0; i < a.size(); ++i) {
      REQUIRE(std::isfinite(a[i]));
      worst = std::max(worst, static_cast<double>(std::abs(a[i] - g[i])));
      worst_rel = std::max(worst_rel, static_cast<double>(std::abs(a[i] - g[i])) /
                                          std::max(1.0, static_cast<double>(std::abs(a[i]))));
    }
    ++steps;
    decode_steps += b.num_decodes == b.num_seqs() ? 1 : 0;
    // Greedy next tokens (equal when the logits are).
    for (size_t i = 0; i < batch_seqs.size(); ++i) {
      const float* row = a.data() + i * V;
      const int32_t t = static_cast<int32_t>(std::max_element(row, row + V) - row);
      const float* grow = g.data() + i * V;
      CHECK(t == static_cast<int32_t>(std::max_element(grow, grow + V) - grow));
      batch_seqs[i]->cached = static_cast<int32_t>(batch_seqs[i]->tokens.size());
      batch_seqs[i]->tokens.push_back(std::min<int32_t>(t, static_cast<int32_t>(V - 17)));
      grow_pages(*batch_seqs[i]);
    }
  };
  for (size_t wave : {1u, 3u, 5u, 8u, 13u}) {
    // Prefill the newcomers (one mixed step with the running decodes), then decode.
    std::vector<Seq*> step = live;
    while (live.size() < wave) {
      Seq& s = seqs[live.size()];
      grow_pages(s);
      live.push_back(&s);
      step.push_back(&s);
    }
    int32_t need = 0;
    for (Seq* s : step) need = std::max(need, static_cast<int32_t>(s->pages.size()));
    run(step, need);
    for (int d = 0; d < 6; ++d) {
      need = 0;
      for (Seq* s : live) need = std::max(need, static_cast<int32_t>(s->pages.size()));
      // Wider tables than needed on some steps: another width bucket, same logits.
      run(live, d % 3 == 2 ? need + 9 : need);
    }
  }
  const auto* cache = graphed.graph->decode_graphs();
  std::printf(
      "  %s (page %lld): %lld steps (%lld decode-only), %lld decode graphs recorded, %lld "
      "replays; worst logit difference graphs vs op by op %.3e (relative %.3e)\n",
      set.c_str(), static_cast<long long>(page), static_cast<long long>(steps),
      static_cast<long long>(decode_steps), static_cast<long long>(cache->recorded()),
      static_cast<long long>(cache->replays()), worst, worst_rel);
  CHECK(cache->replays() == decode_steps);
  CHECK(cache->recorded() >= 5);
  // Every layer runs the same kernels on the same rows, so the hidden states match bit for
  // bit; the float32 LM head of a padded bucket may accumulate in another order (cuBLAS picks
  // its kernel by row count): a few float32 ulps of the logit.
  CHECK(worst_rel <= 1e-6);
}

TEST_CASE("CUDA graphs: decode steps equal op-by-op steps (demo model, m3-tiny)") {
  CheckDecodeGraphs("demo-model", 16);
  CheckDecodeGraphs("demo-model", 4);
  CheckDecodeGraphs("m3-tiny", 4);
}

class Outputs {
 public:
  engine::OutputSink Sink(const std::string& id) {
    return [this, id](engine::RequestOutput&& o) {
      std::lock_guard<std::mutex> lock(mu_);
      Done& d = got_[id];
      d.tokens.insert(d.tokens.end(), o.tokens.begin(), o.tokens.end());
      for (const auto& l : o.logprobs) d.logprobs.push_back(l.logprob);
      if (o.finish != engine::FinishReason::kNone) {
        d.finished = true;
        d.error = o.error;
        cv_.notify_all();
      }
    };
  }
  struct Done {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    bool finished = false;
    std::string error;
  };
  Done Wait(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return got_[id].finished; });
    return got_[id];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Done> got_;
};

TEST_CASE("CUDA graphs: serving with graphs on equals graphs off (preemption, prefix hits)") {
  // The demo prompts (texts, images, video) at once, twice over (the second round hits the
  // prefix cache), on a pool too small for all of them (preemption), greedy and seeded.
  std::vector<engine::EngineRequest> reqs;
  for (const DemoPrompt& p : DemoPrompts()) {
    if (p.inputs.images || p.inputs.videos) continue;
    for (int sampled = 0; sampled < 2; ++sampled) {
      engine::EngineRequest r;
      r.id = p.name + (sampled ? "-seeded" : "");
      r.prompt.assign(p.inputs.input_ids.begin(), p.inputs.input_ids.end());
      r.sampling.temperature = sampled ? 0.8 : 0;
      r.sampling.seed = 11;
      r.sampling.max_tokens = 24;
      r.sampling.ignore_eos = true;
      r.sampling.return_logprobs = true;
      reqs.push_back(std::move(r));
    }
  }
  std::map<std::string, std::vector<Outputs::Done>> got[2];
  int64_t preemptions[2] = {0, 0}, prefix[2] = {0, 0};
  for (int graphs = 0; graphs < 2; ++graphs) {
    engine::RunnerOptions ro;
    ro.device = "cuda";
    ro.cuda_graphs = graphs == 1;
    ro.max_num_seqs = 8;
    ro.max_batched_tokens = 96;
    engine::EngineConfig cfg;
    cfg.kv_pages = 24;
    cfg.page_size = 4;
    cfg.scheduler.max_num_seqs = 8;
    cfg.scheduler.max_batched_tokens = 96;
    cfg.scheduler.max_prefill_chunk = 32;
    engine::EngineCore core(engine::LoadModelRunner(DataPath("demo-model/model"), ro), cfg);
    for (int round = 0; round < 2; ++round) {
      Outputs out;
      for (const auto& r : reqs) core.Submit(r, out.Sink(r.id));
      for (const auto& r : reqs) got[graphs][r.id].push_back(out.Wait(r.id));
    }
    preemptions[graphs] = core.Stats().preemptions;
    prefix[graphs] = core.Stats().prefix_hit_tokens;
  }
  double worst = 0;
  for (const auto& r : reqs) {
    CAPTURE(r.id);
    for (int round = 0; round < 2; ++round) {
      const auto &off = got[0][r.id][round], &on = got[1][r.id][round];
      CHECK(off.error == "");
      CHECK(on.error == "");
      CHECK(off.tokens.size() == 24);
      CHECK(on.tokens == off.tokens);
      REQUIRE(on.logprobs.size() == off.logprobs.size());
      for (size_t i = 0; i < on.logprobs.size(); ++i)
        worst = std::max(worst, static_cast<double>(std::abs(on.logprobs[i] - off.logprobs[i])));
    }
  }
  std::printf(
      "  serving, graphs off / on: %lld / %lld preemptions, %lld / %lld prefix-hit tokens; "
      "worst chosen-token logprob difference %.3e\n",
      static_cast<long long>(preemptions[0]), static_cast<long long>(preemptions[1]),
      static_cast<long long>(prefix[0]), static_cast<long long>(prefix[1]), worst);
  CHECK(preemptions[1] > 0);
  CHECK(prefix[1] > 0);
  CHECK(worst <= 1e-6);
}

}  // namespace
}  // namespace m3::test
