// Decode steps under CUDA graphs against the same steps op by op, on the GPU. The decoder graph
// with recorded decode graphs gives the logits of one without (within 1e-6 relative) for the
// demo model and m3-tiny: batch sizes inside and between the row buckets (padded rows), tables
// of several widths, sequences joining, a preempted sequence recomputed, a prefix shared. At
// the real head shapes (a random checkpoint on the split-K attention and indexer kernels, whose
// plans follow the padded width and rows) the replay equals the padded step op by op, and the
// unpadded step within bf16 rounding (reported). In every case a decoder with graphs off but
// decode steps at their buckets' shapes (what the runner does with --cuda-graphs off) gives the
// graphs' logits bit for bit. The serving runtime (EngineCore) gives the
// same tokens with graphs on and off, with preemption and prefix-cache hits (logprobs within
// bf16 rounding: arrival timing changes the batching).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>

#include "engine/backend/make_device.h"
#include "engine/backend/make_m3_ops.h"
#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_decoder_graph.h"
#include "engine/minimax_m3/m3_model_weights.h"
#include "engine/model_registry.h"
#include "engine/runtime/engine_core.h"
#include "shared/safetensors.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/cuda/paged_sequences.h"
#include "tests/cuda/real_head_checkpoint.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::minimax_m3::LoadModelConfig;
using engine::minimax_m3::ModelConfig;

using engine::minimax_m3::M3DecoderGraph;

// One model on its own backend (each backend has one step workspace, which a decoder graph
// sizes for itself).
struct Decoder {
  ModelConfig config;
  std::unique_ptr<engine::backend::Device> be;
  std::unique_ptr<engine::backend::M3Ops> ops;
  engine::minimax_m3::M3ModelWeights weights;
  std::unique_ptr<M3DecoderGraph> graph;
  // buckets: decode-only steps at their graph bucket's shape (recorded when graphs).
  Decoder(const std::string& dir, bool graphs, bool buckets, int64_t pages, int64_t page_size) {
    config = LoadModelConfig(dir);
    be = engine::backend::MakeDevice("cuda");
    ops = engine::backend::MakeM3Ops(*be);
    engine::backend::LoadReport report;
    weights = engine::minimax_m3::LoadM3ModelWeights(WeightStore::OpenDirectory(dir), config, *be,
                                                     report);
    engine::minimax_m3::DecoderStepLimits limits;
    limits.max_num_seqs = 16;
    limits.max_batched_tokens = 256;
    limits.graphs = graphs;
    limits.decode_buckets = buckets;
    graph = std::make_unique<M3DecoderGraph>(config, weights, *be, *ops, limits);
    graph->AllocateKvCache(pages, page_size);
  }
};

using Seq = PagedSeq;

struct GraphCase {
  std::string name, dir;
  int64_t page = 16, pages = 512;
  int min_len = 5, max_len = 60;  // prompt lengths
  // Graph replay against the plain op-by-op step expected equal within float32 ulps (the tiny
  // models: the same kernel paths whatever the table width and row count). Otherwise (the real
  // head shapes: split-K decode attention plans its chunks from the width and row count, which
  // the buckets pad) only within bf16 rounding of it, and equal to the op-by-op run of the same
  // padded step.
  bool exact = true;
};

// The decode step `b` as its graph bucket runs it: rows padded to `rows` with token 0 at
// position 0 on page `pad_page`, tables `width` wide.
engine::ForwardBatch Padded(const engine::ForwardBatch& b, int64_t rows, int32_t width,
                            int32_t pad_page, int64_t page) {
  engine::ForwardBatch p;
  const int64_t n = b.num_rows();
  p.max_pages_per_seq = width;
  p.query_start.push_back(0);
  for (int64_t r = 0; r < rows; ++r) {
    const bool real = r < n;
    p.token_ids.push_back(real ? b.token_ids[r] : 0);
    p.positions.push_back(real ? b.positions[r] : 0);
    p.context_lens.push_back(real ? b.context_lens[r] : 0);
    p.slot_mapping.push_back(real ? b.slot_mapping[r] : int64_t{pad_page} * page);
    p.query_start.push_back(static_cast<int32_t>(r + 1));
    p.logits_rows.push_back(static_cast<int32_t>(r));
    std::vector<int32_t> table(width, -1);
    if (real)
      std::copy(b.block_tables.begin() + r * b.max_pages_per_seq,
                b.block_tables.begin() + (r + 1) * b.max_pages_per_seq, table.begin());
    else
      table[0] = pad_page;
    p.block_tables.insert(p.block_tables.end(), table.begin(), table.end());
  }
  p.num_decodes = static_cast<int32_t>(rows);
  return p;
}

double RowRelL2(const float* a, const float* b, int64_t V) {
  double d2 = 0, a2 = 0;
  for (int64_t v = 0; v < V; ++v) {
    d2 += (static_cast<double>(a[v]) - b[v]) * (static_cast<double>(a[v]) - b[v]);
    a2 += static_cast<double>(a[v]) * a[v];
  }
  return std::sqrt(d2 / std::max(a2, 1e-30));
}

void CheckDecodeGraphs(const GraphCase& c) {
  const std::string& dir = c.dir;
  const int64_t page = c.page, pages = c.pages;
  const int32_t pad_page = static_cast<int32_t>(pages - 1);  // no sequence gets it
  Decoder eager(dir, false, false, pages, page), graphed(dir, true, true, pages, page);
  // Graphs off, decode steps still at their buckets' shapes (what --cuda-graphs off runs).
  Decoder bucketed(dir, false, true, pages, page);
  REQUIRE(graphed.graph->decode_graphs() != nullptr);
  REQUIRE(eager.graph->decode_graphs() == nullptr);
  REQUIRE(!bucketed.graph->decode_graphs()->records());
  const int64_t V = eager.config.text.vocab_size;
  const std::vector<int64_t> buckets = engine::backend::DecodeGraphCache::RowBuckets(16);
  std::mt19937 rng(7);
  // 13 sequences with prompts of min_len..max_len tokens; they join in waves so decode batches
  // take sizes 1, 3, 5, 8, 13 (between buckets: padded rows), their pages interleaving as they
  // grow. After the third wave one sequence is preempted (its pages dropped, all its tokens
  // prefilled again into new pages), and the last sequence shares the first sequence's full
  // pages (a prefix-cache hit: only its own suffix is prefilled).
  std::vector<Seq> seqs(13);
  int32_t next_page = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int len = c.min_len + static_cast<int>(rng() % (c.max_len - c.min_len + 1));
    for (int j = 0; j < len; ++j) seqs[i].tokens.push_back(static_cast<int32_t>(rng() % (V - 16)));
  }
  auto grow_pages = [&](Seq& s) {
    while (static_cast<int64_t>(s.pages.size()) * page < static_cast<int64_t>(s.tokens.size()))
      s.pages.push_back(next_page++);
    REQUIRE(next_page < pad_page);
  };
  double worst = 0, worst_rel = 0, worst_l2 = 0, worst_padded = 0, worst_bucketed = 0;
  int64_t steps = 0, decode_steps = 0, rows_compared = 0, argmax_differ = 0, shared_pages = 0;
  std::vector<Seq*> live;
  auto run = [&](const std::vector<Seq*>& batch_seqs, int32_t width) {
    const engine::ForwardBatch b = StepBatch(batch_seqs, page, width);
    std::vector<float> a, g;
    const engine::CaptureRequest none;
    std::vector<float> o;
    eager.graph->Execute(b, a, none);
    graphed.graph->Execute(b, g, none);
    bucketed.graph->Execute(b, o, none);
    REQUIRE(a.size() == g.size());
    REQUIRE(o.size() == g.size());
    for (size_t i = 0; i < g.size(); ++i)
      worst_bucketed = std::max(worst_bucketed, static_cast<double>(std::abs(o[i] - g[i])));
    for (size_t i = 0; i < a.size(); ++i) {
      REQUIRE(std::isfinite(a[i]));
      worst = std::max(worst, static_cast<double>(std::abs(a[i] - g[i])));
      worst_rel = std::max(worst_rel, static_cast<double>(std::abs(a[i] - g[i])) /
                                          std::max(1.0, static_cast<double>(std::abs(a[i]))));
    }
    const bool decode = b.num_decodes == b.num_seqs();
    ++steps;
    decode_steps += decode ? 1 : 0;
    if (decode && !c.exact) {
      // The same padded step op by op (writing the same K/V again): what the graph replays.
      const int64_t rows = *std::lower_bound(buckets.begin(), buckets.end(), b.num_rows());
      int32_t w = 1;
      while (w < width) w *= 2;
      std::vector<float> p;
      eager.graph->Execute(Padded(b, rows, w, pad_page, page), p, none);
      for (size_t i = 0; i < g.size(); ++i)
        worst_padded =
            std::max(worst_padded, static_cast<double>(std::abs(p[i] - g[i])) /
                                       std::max(1.0, static_cast<double>(std::abs(p[i]))));
    }
    // Greedy next tokens from the op-by-op logits feed both decoders.
    for (size_t i = 0; i < batch_seqs.size(); ++i) {
      const float* row = a.data() + i * V;
      const float* grow = g.data() + i * V;
      worst_l2 = std::max(worst_l2, RowRelL2(row, grow, V));
      const int32_t t = static_cast<int32_t>(std::max_element(row, row + V) - row);
      const int32_t tg = static_cast<int32_t>(std::max_element(grow, grow + V) - grow);
      ++rows_compared;
      argmax_differ += t != tg ? 1 : 0;
      if (c.exact) CHECK(t == tg);
      batch_seqs[i]->cached = static_cast<int32_t>(batch_seqs[i]->tokens.size());
      batch_seqs[i]->tokens.push_back(std::min<int32_t>(t, static_cast<int32_t>(V - 17)));
      grow_pages(*batch_seqs[i]);
    }
  };
  for (size_t wave : {1u, 3u, 5u, 8u, 13u}) {
    // Prefill the newcomers (one mixed step with the running decodes), then decode.
    std::vector<Seq*> step;
    std::vector<Seq*> newcomers;
    if (wave == 8) {
      // Preemption: live[1] loses its pages and is recomputed from its first token.
      Seq& s = *live[1];
      s.pages.clear();
      s.cached = 0;
      grow_pages(s);
    }
    while (live.size() < wave) {
      Seq& s = seqs[live.size()];
      if (live.size() == 12) {
        // Prefix-cache hit: the first sequence's full pages, then this sequence's own tokens.
        const int64_t full = seqs[0].cached / page;
        shared_pages = full;
        std::vector<int32_t> tokens(seqs[0].tokens.begin(), seqs[0].tokens.begin() + full * page);
        tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
        s.tokens = tokens;
        s.pages.assign(seqs[0].pages.begin(), seqs[0].pages.begin() + full);
        s.cached = static_cast<int32_t>(full * page);
      }
      grow_pages(s);
      live.push_back(&s);
      newcomers.push_back(&s);
    }
    // Decodes first, then the prefills (the preempted sequence among them).
    for (Seq* s : live)
      if (s->tokens.size() - s->cached == 1) step.push_back(s);
    for (Seq* s : live)
      if (s->tokens.size() - s->cached != 1) step.push_back(s);
    int32_t need = 0;
    for (Seq* s : step) need = std::max(need, static_cast<int32_t>(s->pages.size()));
    run(step, need);
    for (int d = 0; d < 6; ++d) {
      need = 0;
      for (Seq* s : live) need = std::max(need, static_cast<int32_t>(s->pages.size()));
      // Wider tables than needed on some steps: another width bucket.
      run(live, d % 3 == 2 ? need + 9 : need);
    }
  }
  const auto* cache = graphed.graph->decode_graphs();
  std::printf(
      "  %s (page %lld): %lld steps (%lld decode-only), a preempted sequence recomputed, %lld "
      "shared prefix pages; %lld decode graphs recorded, %lld replays; graphs vs op by op: worst "
      "logit difference %.3e (relative %.3e), worst row relative L2 %.3e, greedy tokens "
      "differing %lld of %lld rows",
      c.name.c_str(), static_cast<long long>(page), static_cast<long long>(steps),
      static_cast<long long>(decode_steps), static_cast<long long>(shared_pages),
      static_cast<long long>(cache->recorded()), static_cast<long long>(cache->replays()), worst,
      worst_rel, worst_l2, static_cast<long long>(argmax_differ),
      static_cast<long long>(rows_compared));
  if (!c.exact) std::printf("; vs the padded step op by op: relative %.3e", worst_padded);
  std::printf("; graphs on vs off (bucketed op by op): worst logit difference %.3e\n",
              worst_bucketed);
  // Graphs change no result: with them off, decode steps run the same launches op by op.
  CHECK(worst_bucketed == 0.0);
  CHECK(bucketed.graph->decode_graphs()->replays() == decode_steps);
  CHECK(bucketed.graph->decode_graphs()->recorded() == 0);
  CHECK(cache->replays() == decode_steps);
  CHECK(cache->recorded() >= 4);
  CHECK(shared_pages > 0);
  if (c.exact) {
    // Every layer runs the same kernels on the same rows; the float32 LM head of a padded
    // bucket may accumulate in another order (cuBLAS picks its kernel by row count): a few
    // float32 ulps of the logit.
    CHECK(worst_rel <= 1e-6);
  } else {
    // The replay is the padded step (the same launches on the same inputs); against the
    // unpadded step it differs by bf16 rounding of other split-K summation orders, which the
    // random weights' discrete choices (MSA blocks, experts) amplify: reported, not bounded.
    CHECK(worst_padded <= 1e-6);
  }
}

TEST_CASE("CUDA graphs: decode steps equal op-by-op steps (demo model, m3-tiny)") {
  for (int64_t page : {16, 4}) {
    GraphCase c;
    c.name = "demo-model";
    c.dir = DataPath("demo-model/model");
    c.page = page;
    CheckDecodeGraphs(c);
  }
  GraphCase tiny;
  tiny.name = "m3-tiny";
  tiny.dir = DataPath("m3-tiny/model");
  tiny.page = 4;
  CheckDecodeGraphs(tiny);
}

TEST_CASE("CUDA graphs: decode at the real head shapes within bf16 rounding of op-by-op") {
  // A random 2-layer checkpoint (full attention + dense MLP, MSA + MoE) with the real head
  // shapes (16 query / 4 KV heads of 128, index 4 x 128, block 128, top-16), so the split-K
  // tensor-core decode attention and the indexer's scoring / top-k kernels run, with their
  // scratch; prompts of 2000-2600 tokens (16-21 MSA blocks: the top-16 selection is real).
  const std::string& dir = RealHeadCheckpoint();
  for (int64_t page : {128, 16}) {
    GraphCase c;
    c.name = "real-head-shapes";
    c.dir = dir;
    c.page = page;
    c.pages = page == 128 ? 512 : 4096;
    c.min_len = 2000;
    c.max_len = 2600;
    c.exact = false;
    CheckDecodeGraphs(c);
  }
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
  // Requests reach the engine while it steps, so the two runs batch them differently (their
  // preemption and prefix-hit counts differ) and batch-size-dependent kernels (GEMMs, grouped
  // experts) round differently: equal tokens, logprobs within bf16 rounding. Graph replay
  // against the same steps op by op is checked exactly above.
  CHECK(worst <= 5e-2);
}

}  // namespace
}  // namespace m3::test
