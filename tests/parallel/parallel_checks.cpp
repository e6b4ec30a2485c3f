// The parallel parity checks: the runner step by step, the engine batched with preemption.
#include "tests/parallel/parallel_checks.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include "engine/model_registry.h"
#include "engine/runtime/engine_core.h"
#include "kernels/cpu/sampling.h"
#include "tests/engine/golden_cases.h"
#include "tests/engine_server/engine_test_util.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

// `set`: a directory under tests/data holding model/, or an absolute model directory.
// all_reduce: RunnerOptions::all_reduce (GPU ranks).
std::unique_ptr<engine::ModelRunner> Load(const std::string& set, const std::string& device,
                                          Parallel p, const std::string& all_reduce = "auto") {
  engine::RunnerOptions o;
  o.device = device;
  o.tensor_parallel = p.tp;
  o.expert_parallel = p.ep;
  o.all_reduce = all_reduce;
  return engine::LoadModelRunner(set.starts_with('/') ? set : DataPath(set + "/model"), o);
}

double RelL2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// The key a single-rank run of (set, device, prompt, the prompt rows asked for) is kept under,
// so the parallel configurations compared with it run it once.
std::string RunKey(const std::string& set, const std::string& device,
                   const engine::ModelInputs& prompt, int64_t last_rows) {
  std::string key = set;  // appended: GCC 12's -Wrestrict misfires on "literal" + string
  key += '@';
  key += device;
  key += '#';
  key += std::to_string(prompt.input_ids.size());
  key += '/';
  key += std::to_string(last_rows);
  return key;
}

struct Trace {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // the prompt's rows asked for, then each decode
};

// One sequence: the prompt (media encoded by the runner, one span per placeholder row) in one
// step with the logits of its last `last_rows` rows (0: every row), then `decodes` greedy
// steps. `capture`: the prompt step's hidden states and MSA selections are kept there (rank
// 0's on a parallel runner).
Trace RunPrompt(engine::ModelRunner& r, const engine::ModelInputs& in, int decodes,
                NamedTensors* capture = nullptr, int64_t last_rows = 0) {
  const engine::RunnerInfo& info = r.info();
  const int64_t page = info.msa_block_size > 0 ? std::min<int64_t>(4, info.msa_block_size) : 4;
  const int64_t n = static_cast<int64_t>(in.input_ids.size());
  const int64_t pages = (n + decodes + page - 1) / page;
  r.AllocateKvCache(pages, page);
  const int64_t first_row = last_rows > 0 ? std::max<int64_t>(0, n - last_rows) : 0;
  engine::ForwardBatch b;
  for (int64_t i = 0; i < n; ++i) {
    b.token_ids.push_back(static_cast<int32_t>(in.input_ids[i]));
    b.positions.push_back(static_cast<int32_t>(i));
    b.slot_mapping.push_back(i);
    if (i >= first_row) b.logits_rows.push_back(static_cast<int32_t>(i));
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
  if (capture) r.SetCapture({true, true, false, capture});
  r.Execute(b, logits);
  if (capture) r.SetCapture({});
  const int64_t V = info.vocab_size;
  for (int64_t i = 0; i < n - first_row; ++i)
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

engine::EngineRequest Request(const std::string& id, const engine::ModelInputs& in,
                              const engine::RunnerInfo& info) {
  engine::EngineRequest r;
  r.id = id;
  r.prompt.assign(in.input_ids.begin(), in.input_ids.end());
  r.media = MediaItems(in);
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
}  // namespace

EngineExercise CheckEngineParity(const std::string& set, const std::string& device,
                                 const std::vector<engine::ModelInputs>& prompts, Parallel p,
                                 const ParityTolerance& tol) {
  CAPTURE(set);
  CAPTURE(device);
  CAPTURE(p.tp);
  CAPTURE(p.ep);
  const int64_t page = 4;
  engine::EngineConfig cfg;
  cfg.page_size = page;
  cfg.kv_pages = 512;
  engine::EngineCore alone(Load(set, device, {1, 1}), cfg);
  std::vector<engine::EngineRequest> reqs;
  int64_t longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string id = "r";  // appended: GCC 12's -Wrestrict misfires on "literal" + string
    id += std::to_string(i);
    reqs.push_back(Request(id, prompts[i], alone.info()));
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
  engine::EngineCore par(Load(set, device, p), tight);
  double worst = 0;
  for (int round = 0; round < 2; ++round) {
    // Each prompt twice at once: the copies share a prefix and outgrow the pool together.
    Collector col;
    for (const char* copy : {"a", "b"})
      for (const auto& r : reqs) {
        engine::EngineRequest c = r;
        c.id += copy;
        par.Submit(c, col.Sink(c.id));
      }
    for (const char* copy : {"a", "b"})
      for (const auto& r : reqs) {
        CAPTURE(r.id);
        const Collected got = col.Wait(r.id + copy);
        CHECK(got.error == "");
        if (!tol.same_tokens) {
          // bf16 near-ties: each copy runs to its length; its tokens may differ.
          CHECK(got.tokens.size() == want.at(r.id).tokens.size());
          continue;
        }
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
      "  %s %s tp %d ep %d engine: %zu requests x 2 copies x 2 rounds, %lld preemptions, %lld "
      "prefix-hit "
      "tokens, worst logprob difference %.2e\n",
      set.c_str(), device.c_str(), p.tp, p.ep, reqs.size(), static_cast<long long>(s.preemptions),
      static_cast<long long>(s.prefix_hit_tokens), worst);
  CHECK(s.kv_pages_used == 0);
  CHECK(worst <= tol.logprob_abs);
  return {s.preemptions, s.prefix_hit_tokens};
}

namespace {

// One prompt step (then `decodes` greedy steps) with the prompt step's hidden states and MSA
// selections captured.
struct Captured {
  Trace trace;
  NamedTensors tensors;
};
Captured RunCaptured(const std::string& set, const std::string& device, Parallel p,
                     const engine::ModelInputs& prompt, int decodes, int64_t last_rows) {
  Captured c;
  c.trace = RunPrompt(*Load(set, device, p), prompt, decodes, &c.tensors, last_rows);
  return c;
}

const HostTensor* Find(const NamedTensors& v, const std::string& name) {
  for (const auto& [n, t] : v)
    if (n == name) return &t;
  return nullptr;
}

// Relative L2 of float tensors; the number of differing entries of selections.
double Distance(const HostTensor& a, const HostTensor& b) {
  if (a.dtype() == DType::kF32) {
    const auto x = a.as<float>(), y = b.as<float>();
    return RelL2(std::vector<float>(x.begin(), x.end()), std::vector<float>(y.begin(), y.end()));
  }
  const auto x = a.as<int64_t>(), y = b.as<int64_t>();
  double differ = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) differ += x[i] != y[i];
  return differ;
}

double WorstRow(const Trace& a, const Trace& b, size_t rows) {
  double worst = 0;
  for (size_t i = 0; i < rows; ++i) worst = std::max(worst, RelL2(a.logits[i], b.logits[i]));
  return worst;
}

// bf16 devices: the single rank and the parallel runner against the float32 CPU runner
// (ParityTolerance::against_reference says why).
void CheckAgainstReference(const std::string& set, const std::string& device,
                           const engine::ModelInputs& prompt, Parallel p,
                           const ParityTolerance& tol, int64_t last_rows) {
  const int decodes = tol.same_tokens ? 4 : 0;
  // The reference and single-rank runs of each (set, device, prompt), computed once.
  static std::map<std::string, std::pair<Captured, Captured>> runs;
  const std::string key = RunKey(set, device, prompt, last_rows) + '/' + std::to_string(decodes);
  if (!runs.count(key))
    runs[key] = {RunCaptured(set, "cpu", {1, 1}, prompt, decodes, last_rows),
                 RunCaptured(set, device, {1, 1}, prompt, decodes, last_rows)};
  const Captured& ref = runs[key].first;
  const Captured& one = runs[key].second;
  const Captured got = RunCaptured(set, device, p, prompt, decodes, last_rows);
  if (tol.same_tokens) CHECK(got.trace.tokens == one.trace.tokens);
  // Rows the three runs share inputs for: the prompt's, and the decodes while the tokens agree.
  size_t rows = ref.trace.logits.size() - ref.trace.tokens.size();
  for (size_t d = 0;
       d < got.trace.tokens.size() && d < ref.trace.tokens.size() &&
       got.trace.tokens[d] == ref.trace.tokens[d] && one.trace.tokens[d] == ref.trace.tokens[d];
       ++d)
    ++rows;
  rows = std::min({rows, got.trace.logits.size(), one.trace.logits.size()});
  const double d_one = WorstRow(one.trace, ref.trace, rows);
  const double d_got = WorstRow(got.trace, ref.trace, rows);
  std::printf(
      "  %s %s tp %d ep %d: %zu logits rows against the float32 CPU runner, worst relative L2: "
      "single %.3g, parallel %.3g (parallel against single %.3g)\n",
      set.c_str(), device.c_str(), p.tp, p.ep, rows, d_one, d_got,
      WorstRow(got.trace, one.trace, rows));
  CHECK(d_got <= tol.reference_factor * d_one + tol.logits_rel_l2);
  std::printf("    prompt step (selections: entries differing)\n");
  for (const auto& [name, want] : ref.tensors) {
    CAPTURE(name);
    const HostTensor* a = Find(one.tensors, name);
    const HostTensor* b = Find(got.tensors, name);
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    const double a_ref = Distance(*a, want), b_ref = Distance(*b, want), b_a = Distance(*b, *a);
    std::printf("    %-24s single %.3g | parallel %.3g | parallel against single %.3g\n",
                name.c_str(), a_ref, b_ref, b_a);
    if (want.dtype() != DType::kF32) continue;
    // Every layer no further from float32 than the single rank allows; the first decoder
    // layer's output (before any MSA or expert choice can flip) close to the single rank.
    CHECK(b_ref <= tol.reference_factor * a_ref + tol.logits_rel_l2);
    if (name == "hidden_states.1") CHECK(b_a <= 2 * a_ref + 1e-3);
  }
}

}  // namespace

void CheckLayerwise(const std::string& set, const std::string& device,
                    const engine::ModelInputs& prompt, Parallel p, int64_t last_rows,
                    double first_layer_rel_l2) {
  CAPTURE(set);
  CAPTURE(p.tp);
  CAPTURE(p.ep);
  static std::map<std::string, Captured> single;
  const std::string key = RunKey(set, device, prompt, last_rows);
  if (!single.count(key)) single[key] = RunCaptured(set, device, {1, 1}, prompt, 4, last_rows);
  const Captured& one = single[key];
  const Captured got = RunCaptured(set, device, p, prompt, 4, last_rows);
  std::printf(
      "  %s %s tp %d ep %d against one rank: %zu logits rows, worst relative L2 %.3g; greedy "
      "tokens %s\n    prompt step (selections: entries differing)\n",
      set.c_str(), device.c_str(), p.tp, p.ep, one.trace.logits.size(),
      WorstRow(got.trace, one.trace, std::min(got.trace.logits.size(), one.trace.logits.size())),
      got.trace.tokens == one.trace.tokens ? "equal" : "differ");
  for (const auto& [name, want] : one.tensors) {
    CAPTURE(name);
    const HostTensor* b = Find(got.tensors, name);
    REQUIRE(b != nullptr);
    const double d = Distance(*b, want);
    std::printf("    %-24s %.3g\n", name.c_str(), d);
    if (name == "hidden_states.1") CHECK(d <= first_layer_rel_l2);
  }
}

void CheckRunnerParity(const std::string& set, const std::string& device,
                       const engine::ModelInputs& prompt, Parallel p, const ParityTolerance& tol,
                       int64_t last_rows) {
  CAPTURE(set);
  CAPTURE(device);
  CAPTURE(p.tp);
  CAPTURE(p.ep);
  if (tol.against_reference) return CheckAgainstReference(set, device, prompt, p, tol, last_rows);
  // The single-rank trace of each (set, device, prompt), computed once.
  static std::map<std::string, Trace> single;
  const std::string key = RunKey(set, device, prompt, last_rows);
  if (!single.count(key))
    single[key] = RunPrompt(*Load(set, device, {1, 1}), prompt, 4, nullptr, last_rows);
  const Trace& want = single[key];
  const Trace got = RunPrompt(*Load(set, device, p), prompt, 4, nullptr, last_rows);
  CHECK(got.tokens == want.tokens);
  REQUIRE(got.logits.size() == want.logits.size());
  const double worst = WorstRow(got, want, want.logits.size());
  // How far the single rank's greedy choices were from a tie (largest minus second logit).
  double margin = INFINITY;
  for (size_t i = want.logits.size() - want.tokens.size(); i < want.logits.size(); ++i) {
    float first = -INFINITY, second = -INFINITY;
    for (float v : want.logits[i]) {
      second = std::max(second, std::min(first, v));
      first = std::max(first, v);
    }
    margin = std::min(margin, static_cast<double>(first - second));
  }
  std::printf(
      "  %s %s tp %d ep %d: %zu logits rows, worst relative L2 %.2e; greedy tokens %s, smallest "
      "greedy margin %.3g\n",
      set.c_str(), device.c_str(), p.tp, p.ep, want.logits.size(), worst,
      got.tokens == want.tokens ? "equal" : "DIFFER", margin);
  CHECK(worst <= tol.logits_rel_l2);
}

void CheckAllReduceParity(const std::string& set, const engine::ModelInputs& prompt, Parallel p,
                          int decodes, bool same_tokens, double logits_rel_l2, int64_t last_rows) {
  CAPTURE(set);
  CAPTURE(p.tp);
  CAPTURE(p.ep);
  const Trace nccl = RunPrompt(*Load(set, "cuda", p, "nccl"), prompt, decodes, nullptr, last_rows);
  const Trace peer =
      RunPrompt(*Load(set, "cuda", p, "custom"), prompt, decodes, nullptr, last_rows);
  REQUIRE(peer.logits.size() == nccl.logits.size());
  const size_t prompt_rows = nccl.logits.size() - nccl.tokens.size();
  // Rows up to the first greedy choice that differs (after it the sequences differ).
  size_t rows = nccl.logits.size();
  for (size_t d = 0; d < nccl.tokens.size(); ++d)
    if (peer.tokens[d] != nccl.tokens[d]) {
      rows = prompt_rows + d + 1;
      break;
    }
  double worst = 0, worst_decode = 0;
  size_t identical = 0;
  for (size_t i = 0; i < rows; ++i) {
    const double d = RelL2(peer.logits[i], nccl.logits[i]);
    worst = std::max(worst, d);
    if (i >= prompt_rows) worst_decode = std::max(worst_decode, d);
    identical += peer.logits[i] == nccl.logits[i];
  }
  std::printf(
      "  %s tp %d ep %d, peer all-reduce against NCCL alone: %zu prompt rows + %zu decodes, worst "
      "relative L2 %.2e (decodes %.2e), %zu of %zu rows bit-identical; greedy tokens %s\n",
      set.c_str(), p.tp, p.ep, prompt_rows, nccl.tokens.size(), worst, worst_decode, identical,
      rows, peer.tokens == nccl.tokens ? "equal" : "DIFFER");
  if (same_tokens) CHECK(peer.tokens == nccl.tokens);
  CHECK(worst <= logits_rel_l2);
}

}  // namespace m3::test
