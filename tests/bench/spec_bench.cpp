// m3-bench-spec: speculative decoding's cost and gain on one model (CPU or GPU), with and
// without speculation in one run.
//  - Serving: C requests at once (C from --conc, default 1,4,16), each a random prompt of
//    --prompt tokens decoded greedily for --output tokens (ignore_eos), through the EngineCore,
//    first without speculation, then with --method (default ngram) and k = --k; time per output
//    token per request ((last token - first token) / (tokens - 1), median over requests), output
//    tokens/s over the wall time, and the acceptance counters. --force-acceptance r sets the
//    measuring hook (each draft accepted with probability r: random weights never match), so
//    the machinery is timed at a chosen acceptance rate; `--force-acceptance -1` measures real
//    acceptance (trained model and draft).
//  - Verify step: one sequence at --context tokens (prefilled in chunks), then --steps plain
//    decode steps (1 row) against --steps verify steps (1 + k rows, every row's logits sampled on
//    the device, as the engine runs them), median wall time each and their ratio (issue 37's
//    goal: at most 1.3 at k = 3, batch 1, 32K context).
// One JSON object per measurement on stdout lines starting with "json ".
//   m3-bench-spec --model DIR [--device cuda] [--load-format dummy] [--conc 1,4,16]
//       [--prompt 512] [--output 128] [--k 3] [--method ngram] [--force-acceptance 0.7]
//       [--context 32768] [--steps 50] [--skip-serving] [--skip-verify] [--cuda-graphs on|off]
//       [--eos] (stop at eos) [--draft DIR] (eagle3) [--inputs FILE] (the prompt of every request:
//       a prepared `m3-gateway prepare` output, e.g.
//       tests/data/demo-model/bench/sample3_describe.safetensors)
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cli/engine_generate.h"
#include "engine/model_inputs.h"
#include "engine/model_registry.h"
#include "engine/runtime/engine_core.h"
#include "engine/spec/speculative_config.h"
#include "shared/error.h"

namespace m3::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Options {
  std::string model, device = "cpu", method = "ngram";
  std::string draft;   // --draft DIR: the EAGLE-3 draft (--method eagle3)
  std::string inputs;  // --inputs FILE: every request's prompt (and media), else random tokens
  bool dummy = false, serving = true, verify = true, graphs = true;
  bool eos = false;  // --eos: requests stop at the model's eos (else ignore_eos, --output tokens)
  std::vector<int64_t> conc = {1, 4, 16};
  int64_t prompt = 512, output = 128, k = 3, context = 32768, steps = 50;
  double force = 0.7;
};

std::vector<int64_t> IntList(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoll(item));
  return out;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      Require(i + 1 < argc, ErrorCode::kInvalidArgument, a + " needs a value");
      return argv[++i];
    };
    if (a == "--model")
      o.model = next();
    else if (a == "--device")
      o.device = next();
    else if (a == "--load-format")
      o.dummy = next() == "dummy";
    else if (a == "--conc")
      o.conc = IntList(next());
    else if (a == "--prompt")
      o.prompt = std::stoll(next());
    else if (a == "--output")
      o.output = std::stoll(next());
    else if (a == "--k")
      o.k = std::stoll(next());
    else if (a == "--method")
      o.method = next();
    else if (a == "--draft")
      o.draft = next();
    else if (a == "--eos")
      o.eos = true;
    else if (a == "--inputs")
      o.inputs = next();
    else if (a == "--force-acceptance")
      o.force = std::stod(next());
    else if (a == "--context")
      o.context = std::stoll(next());
    else if (a == "--steps")
      o.steps = std::stoll(next());
    else if (a == "--cuda-graphs")
      o.graphs = next() == "on";
    else if (a == "--skip-serving")
      o.serving = false;
    else if (a == "--skip-verify")
      o.verify = false;
    else
      throw Error(ErrorCode::kInvalidArgument, "unknown option " + a);
  }
  Require(!o.model.empty(), ErrorCode::kInvalidArgument, "--model DIR is required");
  return o;
}

engine::RunnerOptions Runner(const Options& o, int64_t seqs, int64_t rows) {
  engine::RunnerOptions ro;
  ro.device = o.device;
  ro.dummy_weights = o.dummy;
  ro.cuda_graphs = o.graphs;
  ro.max_num_seqs = seqs;
  ro.max_batched_tokens = rows;
  ro.max_logits_per_seq = 1 + o.k;
  if (o.method == "eagle3") ro.draft_hidden_layers = 3;
  return ro;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timeline {
  std::vector<Clock::time_point> at;  // one per output token
  bool done = false;
};

// One serving measurement: C requests at once on a fresh engine.
json Serve(const Options& o, const engine::spec::SpeculativeConfig& spec, int64_t conc) {
  engine::EngineConfig cfg;
  cfg.scheduler.max_num_seqs = std::max<int64_t>(conc, 1);
  cfg.scheduler.max_batched_tokens = std::max<int64_t>(8192, conc * (o.k + 1));
  cfg.speculative = spec;
  if (o.device != "cpu") cfg.gpu_memory_fraction = 0.85;
  engine::EngineCore core(engine::LoadModelRunner(o.model, Runner(o, conc, 8192)), cfg);
  const int64_t vocab = core.info().vocab_size;
  std::optional<engine::ModelInputs> given;
  if (!o.inputs.empty()) given = engine::ReadModelInputs(o.inputs);
  std::mt19937_64 rng(1234);
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Timeline> lines;
  // One round: conc requests of fresh random prompts at once, to their end; its wall time.
  auto round = [&](const std::string& prefix, int64_t max_tokens) {
    lines.clear();
    std::vector<std::pair<engine::EngineRequest, engine::OutputSink>> batch;
    for (int64_t i = 0; i < conc; ++i) {
      std::string rid = prefix;
      rid += std::to_string(i);
      engine::EngineRequest r;
      if (given) {
        r = engine::cli::RequestFromInputs(*given, rid, core.info().spatial_merge_size);
      } else {
        r.id = rid;
        // Random tokens away from the special ids at the bottom of the vocabulary.
        std::uniform_int_distribution<int32_t> tok(16, static_cast<int32_t>(vocab) - 1);
        for (int64_t t = 0; t < o.prompt; ++t) r.prompt.push_back(tok(rng));
      }
      r.sampling.temperature = 0;
      r.sampling.max_tokens = max_tokens;
      r.sampling.ignore_eos = !o.eos;
      for (int64_t e : core.info().eos_token_ids)
        r.sampling.eos_token_ids.push_back(static_cast<int32_t>(e));
      lines[r.id];
      const std::string id = r.id;
      batch.emplace_back(std::move(r), [&, id](engine::RequestOutput&& out) {
        std::lock_guard<std::mutex> lock(mu);
        Timeline& t = lines[id];
        t.at.insert(t.at.end(), out.tokens.size(), Clock::now());
        if (out.finish != engine::FinishReason::kNone) {
          t.done = true;
          cv.notify_all();
        }
      });
    }
    const Clock::time_point start = Clock::now();
    core.SubmitAll(std::move(batch));
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] {
        for (const auto& [id, t] : lines)
          if (!t.done) return false;
        return true;
      });
    }
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    while (!core.Idle() || core.Stats().running) std::this_thread::yield();
    return wall;
  };
  // A warm-up round first: the first steps of a fresh engine record CUDA graphs and size
  // scratch buffers, which is not decoding.
  round("warmup", std::min<int64_t>(o.output, 24));
  const engine::EngineStats before = core.Stats();
  const double wall = round("r", o.output);
  engine::EngineStats s = core.Stats();
  s.steps -= before.steps;
  s.spec_proposed -= before.spec_proposed;
  s.spec_accepted -= before.spec_accepted;
  s.spec_steps -= before.spec_steps;
  std::vector<double> tpot;
  int64_t tokens = 0;
  for (const auto& [id, t] : lines) {
    tokens += static_cast<int64_t>(t.at.size());
    if (t.at.size() > 1)
      tpot.push_back(std::chrono::duration<double, std::milli>(t.at.back() - t.at.front()).count() /
                     static_cast<double>(t.at.size() - 1));
  }
  json j = {{"kind", "serving"},
            {"method", spec.enabled() ? engine::spec::SpeculativeMethodName(spec.method) : "none"},
            {"k", spec.enabled() ? spec.num_speculative_tokens : 0},
            {"forced_acceptance", spec.forced_acceptance},
            {"concurrency", conc},
            {"prompt", given ? static_cast<int64_t>(given->input_ids.size()) : o.prompt},
            {"stop_at_eos", o.eos},
            {"output", o.output},
            {"tpot_ms_median", Median(tpot)},
            {"output_tokens_per_s", static_cast<double>(tokens) / wall},
            {"steps", s.steps},
            {"spec_proposed", s.spec_proposed},
            {"spec_accepted", s.spec_accepted},
            {"spec_verifies", s.spec_steps}};
  if (s.spec_steps > 0)
    j["mean_acceptance_length"] =
        static_cast<double>(s.spec_accepted + s.spec_steps) / static_cast<double>(s.spec_steps);
  return j;
}

// A decode step against a verify step of 1 + k rows at one long context.
json VerifyStep(const Options& o) {
  const int64_t chunk = 8192;
  auto runner = engine::LoadModelRunner(o.model, Runner(o, 4, chunk));
  const engine::RunnerInfo& info = runner->info();
  const int64_t page = info.msa_block_size > 0 ? info.msa_block_size : 16;
  const int64_t total = o.context + o.k + 1;
  Require(
      total <= info.max_model_len, ErrorCode::kInvalidArgument,
      "--context " + std::to_string(o.context) + " exceeds the model's max_position_embeddings");
  const int64_t pages = (total + page - 1) / page;
  runner->AllocateKvCache(pages, page);
  std::vector<int32_t> table(static_cast<size_t>(pages));
  for (int64_t p = 0; p < pages; ++p) table[static_cast<size_t>(p)] = static_cast<int32_t>(p);
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int32_t> tok(16, static_cast<int32_t>(info.vocab_size) - 1);
  std::vector<int32_t> tokens(static_cast<size_t>(total));
  for (auto& t : tokens) t = tok(rng);
  // rows [from, from + n) of the one sequence, logits for the last `want` rows.
  auto batch = [&](int64_t from, int64_t n, int64_t want) {
    engine::ForwardBatch b;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t pos = from + r;
      b.token_ids.push_back(tokens[static_cast<size_t>(pos)]);
      b.positions.push_back(static_cast<int32_t>(pos));
      b.slot_mapping.push_back(pos);  // pages in order: slot = position
    }
    b.query_start = {0, static_cast<int32_t>(n)};
    b.context_lens = {static_cast<int32_t>(from)};
    b.num_decodes = n == 1 ? 1 : 0;
    b.max_pages_per_seq = static_cast<int32_t>(pages);
    b.block_tables = table;
    for (int64_t r = n - want; r < n; ++r) b.logits_rows.push_back(static_cast<int32_t>(r));
    return b;
  };
  std::vector<float> logits;
  for (int64_t from = 0; from < o.context; from += chunk)
    runner->Execute(batch(from, std::min(chunk, o.context - from), 1), logits);
  engine::SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<engine::SampledToken> picks;
  auto time_steps = [&](const engine::ForwardBatch& b) {
    std::vector<engine::SampleRow> rows(b.logits_rows.size(), {&greedy, {}, {}});
    for (int i = 0; i < 5; ++i) runner->ExecuteAndSample(b, rows, picks);
    std::vector<double> t;
    for (int64_t i = 0; i < o.steps; ++i) {
      const Clock::time_point a = Clock::now();
      runner->ExecuteAndSample(b, rows, picks);
      t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
    }
    return Median(t);
  };
  const double decode_us = time_steps(batch(o.context, 1, 1));
  const double verify_us = time_steps(batch(o.context, o.k + 1, o.k + 1));
  return {{"kind", "verify_step"},  {"context", o.context},   {"k", o.k},
          {"decode_us", decode_us}, {"verify_us", verify_us}, {"ratio", verify_us / decode_us},
          {"cuda_graphs", o.graphs}};
}

int Main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  if (o.serving) {
    engine::spec::SpeculativeConfig spec;
    spec.method = engine::spec::ParseSpeculativeMethod(o.method);
    spec.num_speculative_tokens = o.k;
    spec.forced_acceptance = o.force;
    spec.model_dir = o.draft;
    spec.target_model_dir = o.model;
    spec.uniform_drafts = o.device != "cpu" && o.graphs;
    if (o.device == "cpu") spec.backoff_free_rows = 2;  // as serve's
    engine::spec::ValidateSpeculativeConfig(spec);
    for (int64_t c : o.conc) {
      for (bool on : {false, true}) {
        const json j = Serve(o, on ? spec : engine::spec::SpeculativeConfig{}, c);
        std::printf("json %s\n", j.dump().c_str());
        std::fflush(stdout);
      }
    }
  }
  if (o.verify) {
    const json j = VerifyStep(o);
    std::printf("json %s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace
}  // namespace m3::bench

int main(int argc, char** argv) {
  try {
    return m3::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "m3-bench-spec: %s\n", e.what());
    return 2;
  }
}
