// The device sampler (kernels/cuda/sampling through the CUDA backend's SampleRows) against the
// host BatchSampler (the CPU backend's SampleRows) on the same random float32 logits, at the
// real vocabulary (200064) and the demo model's (439): every mode (greedy, temperature, top-k,
// top-p, min-p, all three, penalties, min_tokens masks, logit_bias with an allowed-token bitmask,
// an all-masked row) must pick the same
// token, except where the draw lands within rounding of a CDF boundary or the top-p cut is
// within rounding of its target (counted by a sort-based reference and printed); logprobs and
// the top-n within 1e-4. The device uniform must equal CounterUniform bit for bit. Through the
// serving runtime, the CUDA runner sampling on the device gives the seeded tokens that sampling
// its downloaded logits on the host gives, also for grammar-constrained requests (every token
// allowed by its grammar).
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_device.h"
#include "engine/backend/make_device.h"
#include "engine/model_registry.h"
#include "engine/runtime/engine_core.h"
#include "engine/step/counter_rng.h"
#include "grammar/grammar.h"
#include "kernels/cuda/sampling.cuh"
#include "tests/cuda/demo_prompts.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::SampledToken;
using engine::SampleRow;
using engine::SamplingParams;
using engine::backend::Device;
using engine::backend::DeviceTensor;

constexpr double kNear = 1e-6;  // "within rounding" of a boundary, as a share of the mass

struct Row {
  SamplingParams p;
  std::vector<int32_t> prompt, output;
  std::vector<uint32_t> allowed;  // a grammar-style bitmask; empty: all tokens
};

bool Allowed(const Row& r, int64_t t) {
  return r.allowed.empty() || ((r.allowed[static_cast<size_t>(t >> 5)] >> (t & 31)) & 1u);
}

// The processed logits, as the host sampler makes them (penalties, then min_tokens masks).
std::vector<float> Processed(const float* logits, int64_t V, const Row& r) {
  std::vector<float> z(logits, logits + V);
  const SamplingParams& p = r.p;
  for (const auto& [t, b] : p.logit_bias) z[t] += b;
  const bool rep = p.repetition_penalty != 1.0;
  const bool pen = p.presence_penalty != 0.0 || p.frequency_penalty != 0.0;
  if (rep || pen) {
    std::vector<int32_t> count(static_cast<size_t>(V), 0);
    std::vector<uint8_t> seen(static_cast<size_t>(V), 0);
    for (int32_t t : r.prompt) seen[t] = 1;
    for (int32_t t : r.output) seen[t] = 1, ++count[t];
    for (int64_t t = 0; t < V; ++t) {
      if (!seen[t]) continue;
      float v = z[t];
      if (rep)
        v = v > 0 ? static_cast<float>(v / p.repetition_penalty)
                  : static_cast<float>(v * p.repetition_penalty);
      if (count[t] > 0)
        v -= static_cast<float>(p.frequency_penalty * count[t] + p.presence_penalty);
      z[t] = v;
    }
  }
  if (static_cast<int64_t>(r.output.size()) < p.min_tokens) {
    for (int32_t t : p.stop_token_ids) z[t] = -std::numeric_limits<float>::infinity();
    if (!p.ignore_eos)
      for (int32_t t : p.eos_token_ids) z[t] = -std::numeric_limits<float>::infinity();
  }
  for (int64_t t = 0; t < V; ++t)
    if (!Allowed(r, t)) z[t] = -std::numeric_limits<float>::infinity();
  return z;
}

// Whether the device's choice `g` is one the draw could make within rounding: g in the kept set
// and u within kNear of g's CDF interval (ids ascending), or the top-p cut within kNear of its
// target (then the kept set itself is a rounding decision).
bool NearBoundary(const float* logits, int64_t V, const Row& r, int32_t g) {
  const SamplingParams& p = r.p;
  const std::vector<float> z = Processed(logits, V, r);
  const float zmax = *std::max_element(z.begin(), z.end());
  const double inv_t = 1.0 / p.temperature;
  std::vector<int32_t> cand;
  for (int32_t i = 0; i < V; ++i) {
    if (z[i] == -std::numeric_limits<float>::infinity()) continue;
    if (p.min_p > 0 && (static_cast<double>(z[i]) - zmax) * inv_t < std::log(p.min_p)) continue;
    cand.push_back(i);
  }
  std::sort(cand.begin(), cand.end(),
            [&](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < cand.size()) cand.resize(p.top_k);
  auto w = [&](int32_t i) { return std::exp((static_cast<double>(z[i]) - zmax) * inv_t); };
  double total = 0;
  for (int32_t i : cand) total += w(i);
  if (p.top_p < 1.0) {
    const double target = p.top_p * total;
    double acc = 0;
    size_t n = 0;
    while (n < cand.size() && acc < target) {
      acc += w(cand[n++]);
      if (std::abs(acc - target) <= kNear * total) return true;
    }
    cand.resize(std::max<size_t>(n, 1));
    total = 0;
    for (int32_t i : cand) total += w(i);
  }
  std::sort(cand.begin(), cand.end());
  const double u = engine::CounterUniform(p.seed, r.output.size());
  double before = 0;
  for (int32_t i : cand) {
    const double after = before + w(i) / total;
    if (i == g) return u >= before - kNear && u <= after + kNear;
    before = after;
  }
  return false;
}

struct Mode {
  std::string name;
  SamplingParams p;
  bool history = false;
  bool bias_and_mask = false;  // random logit_bias entries and a random allowed-token bitmask
};

std::vector<Mode> Modes() {
  std::vector<Mode> m;
  SamplingParams base;
  base.return_logprobs = true;
  auto add = [&](std::string name, auto&& set, bool history = false) {
    SamplingParams p = base;
    set(p);
    m.push_back({std::move(name), p, history});
  };
  add("greedy", [](SamplingParams& p) { p.temperature = 0; });
  add("temperature 1", [](SamplingParams& p) { p.temperature = 1.0; });
  add("temperature 0.7", [](SamplingParams& p) { p.temperature = 0.7; });
  add("top-k 40", [](SamplingParams& p) { p.top_k = 40; });
  add("top-k 1", [](SamplingParams& p) { p.top_k = 1, p.temperature = 0.9; });
  add("top-p 0.9", [](SamplingParams& p) { p.top_p = 0.9; });
  add("top-p 0.3 T 1.3", [](SamplingParams& p) { p.top_p = 0.3, p.temperature = 1.3; });
  add("min-p 0.05", [](SamplingParams& p) { p.min_p = 0.05; });
  add("top-k 50 top-p 0.95 min-p 0.01 T 0.8",
      [](SamplingParams& p) { p.top_k = 50, p.top_p = 0.95, p.min_p = 0.01, p.temperature = 0.8; });
  add(
      "penalties + top-p 0.8",
      [](SamplingParams& p) {
        p.repetition_penalty = 1.3, p.presence_penalty = 0.5, p.frequency_penalty = 0.25;
        p.top_p = 0.8;
      },
      true);
  add(
      "penalties greedy",
      [](SamplingParams& p) {
        p.temperature = 0, p.repetition_penalty = 1.5, p.frequency_penalty = 0.7;
      },
      true);
  add(
      "min_tokens masks + top-k 5",
      [](SamplingParams& p) {
        p.min_tokens = 1000, p.top_k = 5, p.stop_token_ids = {0, 1, 2}, p.eos_token_ids = {3};
      },
      true);
  add("top-5 logprobs", [](SamplingParams& p) { p.logprobs = 5, p.temperature = 1.1; });
  add("top-20 logprobs greedy", [](SamplingParams& p) { p.logprobs = 20, p.temperature = 0; });
  add("logit_bias + bitmask greedy", [](SamplingParams& p) { p.temperature = 0; });
  m.back().bias_and_mask = true;
  add("logit_bias + bitmask top-p 0.9", [](SamplingParams& p) { p.top_p = 0.9; });
  m.back().bias_and_mask = true;
  add(
      "logit_bias + bitmask + penalties top-k 20",
      [](SamplingParams& p) { p.top_k = 20, p.repetition_penalty = 1.2, p.logprobs = 3; }, true);
  m.back().bias_and_mask = true;
  return m;
}

void CompareAtVocab(int64_t V, int rows_per_mode) {
  std::unique_ptr<Device> cpu = engine::backend::MakeCpuDevice();
  std::unique_ptr<Device> gpu = engine::backend::MakeDevice("cuda");
  std::mt19937_64 rng(V);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int64_t draws = 0, mismatches = 0, near = 0;
  double worst_lp = 0;
  for (const Mode& mode : Modes()) {
    const int n = rows_per_mode;
    std::vector<float> logits(static_cast<size_t>(n * V));
    std::vector<Row> rows(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      // Sharper and flatter rows: scale 0.5 .. 4.
      const float scale = 0.5f + 3.5f * static_cast<float>(r) / static_cast<float>(n);
      for (int64_t i = 0; i < V; ++i) logits[r * V + i] = scale * normal(rng);
      Row& row = rows[static_cast<size_t>(r)];
      row.p = mode.p;
      row.p.seed = rng();
      if (mode.history) {
        std::uniform_int_distribution<int32_t> tok(
            0, static_cast<int32_t>(std::min<int64_t>(V, 64)) - 1);
        for (int j = 0; j < 40; ++j) row.prompt.push_back(tok(rng));
        for (int j = 0; j < 25; ++j) row.output.push_back(tok(rng));
        // Push the history tokens to the top so the penalties decide.
        for (int32_t t : row.output) logits[r * V + t] += 6.0f;
      } else {
        row.output.assign(static_cast<size_t>(rng() % 7), 1);  // the draw counter
      }
      if (mode.bias_and_mask) {
        // Ban the raw top few (-100), lift a few others, allow about a third of the vocabulary.
        std::vector<int32_t> order(static_cast<size_t>(V));
        std::iota(order.begin(), order.end(), 0);
        const float* L = &logits[r * V];
        std::partial_sort(order.begin(), order.begin() + 3, order.end(),
                          [&](int32_t a, int32_t b) { return L[a] > L[b]; });
        std::vector<std::pair<int32_t, float>> bias;
        for (int j = 0; j < 3; ++j) bias.emplace_back(order[static_cast<size_t>(j)], -100.0f);
        for (int j = 0; j < 8; ++j) {
          const auto t = static_cast<int32_t>(rng() % static_cast<uint64_t>(V));
          if (std::none_of(bias.begin(), bias.end(), [&](auto& e) { return e.first == t; }))
            bias.emplace_back(t, static_cast<float>(static_cast<int>(rng() % 21) - 5));
        }
        std::sort(bias.begin(), bias.end());
        row.p.logit_bias = bias;
        row.allowed.assign(static_cast<size_t>((V + 31) / 32), 0u);
        for (int64_t t = 0; t < V; ++t)
          if (rng() % 3 == 0) row.allowed[static_cast<size_t>(t >> 5)] |= 1u << (t & 31);
      }
    }
    std::vector<SampleRow> sr;
    for (const Row& r : rows) sr.push_back({&r.p, r.prompt, r.output, r.allowed});
    DeviceTensor lc = cpu->Alloc(DType::kF32, {n, V}), lg = gpu->Alloc(DType::kF32, {n, V});
    cpu->Upload(logits.data(), lc);
    gpu->Upload(logits.data(), lg);
    std::vector<SampledToken> want, got;
    cpu->SampleRows(lc, sr, want);
    gpu->SampleRows(lg, sr, got);
    REQUIRE(got.size() == want.size());
    int64_t mode_mis = 0;
    for (int r = 0; r < n; ++r) {
      const SampledToken& a = want[static_cast<size_t>(r)];
      const SampledToken& b = got[static_cast<size_t>(r)];
      ++draws;
      CHECK(Allowed(rows[static_cast<size_t>(r)], b.token));
      for (const auto& [t, bias] : rows[static_cast<size_t>(r)].p.logit_bias)
        if (bias <= -100.0f) CHECK(b.token != t);
      if (a.token != b.token) {
        ++mismatches, ++mode_mis;
        const bool excused = !mode.p.greedy() &&
                             NearBoundary(&logits[r * V], V, rows[static_cast<size_t>(r)], b.token);
        near += excused;
        INFO(mode.name << " row " << r << ": cpu " << a.token << " gpu " << b.token);
        CHECK(excused);
        continue;
      }
      worst_lp = std::max(worst_lp, static_cast<double>(std::abs(a.logprob - b.logprob)));
      CHECK(std::abs(a.logprob - b.logprob) <= 1e-4);
      REQUIRE(a.top.size() == b.top.size());
      for (size_t j = 0; j < a.top.size(); ++j) {
        CHECK(a.top[j].first == b.top[j].first);
        CHECK(std::abs(a.top[j].second - b.top[j].second) <= 1e-4);
      }
    }
    std::printf("  cuda sampling V %lld %-40s %d rows, %lld differ\n", static_cast<long long>(V),
                mode.name.c_str(), n, static_cast<long long>(mode_mis));
  }
  std::printf(
      "  cuda sampling V %lld: %lld draws, %lld differ from the CPU (%lld within rounding of a "
      "CDF boundary / top-p cut), worst logprob difference %.2e\n",
      static_cast<long long>(V), static_cast<long long>(draws), static_cast<long long>(mismatches),
      static_cast<long long>(near), worst_lp);
  CHECK(mismatches == near);
}

TEST_CASE("device CounterUniform has the host's bits") {
  const int64_t n = 4096;
  std::vector<uint64_t> seeds(n), counters(n);
  std::mt19937_64 rng(5);
  for (int64_t i = 0; i < n; ++i) seeds[i] = rng(), counters[i] = i < 64 ? i : rng() % 100000;
  uint64_t *ds = nullptr, *dc = nullptr;
  double* du = nullptr;
  REQUIRE(cudaMalloc(&ds, n * 8) == cudaSuccess);
  REQUIRE(cudaMalloc(&dc, n * 8) == cudaSuccess);
  REQUIRE(cudaMalloc(&du, n * 8) == cudaSuccess);
  cudaMemcpy(ds, seeds.data(), n * 8, cudaMemcpyHostToDevice);
  cudaMemcpy(dc, counters.data(), n * 8, cudaMemcpyHostToDevice);
  kernels::cuda::CounterUniforms(ds, dc, n, du, nullptr);
  std::vector<double> u(n);
  REQUIRE(cudaMemcpy(u.data(), du, n * 8, cudaMemcpyDeviceToHost) == cudaSuccess);
  cudaFree(ds), cudaFree(dc), cudaFree(du);
  int64_t equal = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double h = engine::CounterUniform(seeds[i], counters[i]);
    equal += std::memcmp(&h, &u[i], sizeof h) == 0;
  }
  CHECK(equal == n);
}

TEST_CASE("device sampling picks the host sampler's tokens at vocab 200064") {
  CompareAtVocab(200064, 24);
}

TEST_CASE("device sampling picks the host sampler's tokens at the demo vocab (439)") {
  CompareAtVocab(439, 64);
}

TEST_CASE("device sampling: every token masked falls back to the raw argmax; empty batch") {
  std::unique_ptr<Device> cpu = engine::backend::MakeCpuDevice();
  std::unique_ptr<Device> gpu = engine::backend::MakeDevice("cuda");
  const int64_t V = 4;
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f, 2.0f};
  Row r;
  r.p.temperature = 1.0;
  r.p.min_tokens = 5;
  r.p.stop_token_ids = {0, 1, 2, 3};
  r.p.return_logprobs = true;
  r.p.logprobs = 2;
  std::vector<SampleRow> sr = {{&r.p, r.prompt, r.output}};
  DeviceTensor lc = cpu->Alloc(DType::kF32, {1, V}), lg = gpu->Alloc(DType::kF32, {1, V});
  cpu->Upload(logits.data(), lc);
  gpu->Upload(logits.data(), lg);
  std::vector<SampledToken> want, got;
  cpu->SampleRows(lc, sr, want);
  gpu->SampleRows(lg, sr, got);
  REQUIRE(got.size() == 1);
  CHECK(want[0].token == 1);
  CHECK(got[0].token == 1);
  REQUIRE(got[0].top.size() == 2);
  CHECK(got[0].top[0].first == 1);  // ties: the lower id first
  CHECK(got[0].top[1].first == 3);
  CHECK(std::abs(got[0].logprob - want[0].logprob) <= 1e-6);
  // A grammar allowing only ids 0 and 2 while min_tokens masks both: the raw argmax among them.
  r.allowed = {0b0101u};
  sr = {{&r.p, r.prompt, r.output, r.allowed}};
  cpu->SampleRows(lc, sr, want);
  gpu->SampleRows(lg, sr, got);
  CHECK(want[0].token == 2);
  CHECK(got[0].token == 2);
  DeviceTensor none = gpu->Alloc(DType::kF32, {0, V});
  gpu->SampleRows(none, {}, got);
  CHECK(got.empty());
}

// A runner that returns logits only, so EngineCore samples them on the host (ModelRunner's
// default ExecuteAndSample): the reference for the device sampling path.
class HostSampled : public engine::ModelRunner {
 public:
  explicit HostSampled(std::unique_ptr<engine::ModelRunner> r) : r_(std::move(r)) {}
  const engine::RunnerInfo& info() const override { return r_->info(); }
  std::vector<engine::MediaSegment> SplitMedia(bool video,
                                               std::array<int64_t, 3> grid) const override {
    return r_->SplitMedia(video, grid);
  }
  std::shared_ptr<const engine::EncoderOutput> Encode(
      const float* patches, const engine::MediaSegment& segment) override {
    return r_->Encode(patches, segment);
  }
  int64_t KvBytesPerPage(int64_t page_size) const override { return r_->KvBytesPerPage(page_size); }
  void AllocateKvCache(int64_t pages, int64_t page_size) override {
    r_->AllocateKvCache(pages, page_size);
  }
  int64_t num_pages() const override { return r_->num_pages(); }
  int64_t page_size() const override { return r_->page_size(); }
  void Execute(const engine::ForwardBatch& b, std::vector<float>& logits) override {
    r_->Execute(b, logits);
  }
  void SetCapture(const engine::CaptureRequest& c) override { r_->SetCapture(c); }

 private:
  std::unique_ptr<engine::ModelRunner> r_;
};

struct Completion {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> top;
};

// Each request alone (the same steps on both engines), seeded sampling.
std::vector<Completion> Complete(engine::EngineCore& core,
                                 const std::vector<engine::EngineRequest>& reqs) {
  std::vector<Completion> out;
  for (const engine::EngineRequest& r : reqs) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Completion c;
    std::string error;
    core.Submit(r, [&](engine::RequestOutput&& o) {
      std::lock_guard<std::mutex> lock(mu);
      c.tokens.insert(c.tokens.end(), o.tokens.begin(), o.tokens.end());
      for (const SampledToken& t : o.logprobs)
        c.logprobs.push_back(t.logprob), c.top.push_back(t.top);
      if (o.finish != engine::FinishReason::kNone) {
        error = o.error;
        done = true;
        cv.notify_all();
      }
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    INFO(r.id << ": " << error);
    CHECK(error.empty());
    out.push_back(std::move(c));
  }
  return out;
}

TEST_CASE("serving on the CUDA runner: device sampling gives the host-sampled seeded tokens") {
  engine::RunnerOptions ro;
  ro.device = "cuda";
  engine::EngineConfig cfg;
  cfg.kv_pages = 256;
  cfg.page_size = 16;
  engine::EngineCore device(engine::LoadModelRunner(DataPath("demo-model/model"), ro), cfg);
  engine::EngineCore host(
      std::make_unique<HostSampled>(engine::LoadModelRunner(DataPath("demo-model/model"), ro)),
      cfg);
  std::vector<engine::EngineRequest> reqs;
  uint64_t seed = 11;
  for (const DemoPrompt& p : DemoPrompts()) {
    if (p.inputs.images || p.inputs.videos) continue;
    for (int variant = 0; variant < 3; ++variant) {
      engine::EngineRequest r;
      r.id = p.name + "/" + std::to_string(variant);
      r.prompt.assign(p.inputs.input_ids.begin(), p.inputs.input_ids.end());
      SamplingParams& s = r.sampling;
      s.seed = seed++;
      s.max_tokens = 24;
      s.return_logprobs = true;
      s.logprobs = 3;
      s.temperature = 0.8 + 0.2 * variant;
      if (variant == 0) s.top_k = 20, s.top_p = 0.9;
      if (variant == 1) s.min_p = 0.05, s.repetition_penalty = 1.2, s.presence_penalty = 0.3;
      if (variant == 2) s.frequency_penalty = 0.4, s.min_tokens = 8;
      for (int64_t e : device.info().eos_token_ids)
        s.eos_token_ids.push_back(static_cast<int32_t>(e));
      reqs.push_back(std::move(r));
    }
  }
  REQUIRE(!reqs.empty());
  const std::vector<Completion> got = Complete(device, reqs), want = Complete(host, reqs);
  int64_t tokens = 0;
  double worst = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO(reqs[i].id);
    CHECK(got[i].tokens == want[i].tokens);
    if (got[i].tokens != want[i].tokens) continue;
    tokens += static_cast<int64_t>(got[i].tokens.size());
    REQUIRE(got[i].logprobs.size() == want[i].logprobs.size());
    for (size_t j = 0; j < got[i].logprobs.size(); ++j) {
      worst =
          std::max(worst, static_cast<double>(std::abs(got[i].logprobs[j] - want[i].logprobs[j])));
      REQUIRE(got[i].top[j].size() == want[i].top[j].size());
      for (size_t k = 0; k < got[i].top[j].size(); ++k)
        CHECK(got[i].top[j][k].first == want[i].top[j][k].first);
    }
  }
  std::printf(
      "  cuda sampling through EngineCore: %zu seeded requests, %lld tokens equal to host "
      "sampling of the same logits; worst logprob difference %.2e\n",
      reqs.size(), static_cast<long long>(tokens), worst);
  CHECK(worst <= 1e-4);
}

TEST_CASE("structured output on the CUDA runner: device masks give the host-masked tokens") {
  engine::RunnerOptions ro;
  ro.device = "cuda";
  engine::EngineConfig cfg;
  cfg.kv_pages = 256;
  cfg.page_size = 16;
  engine::EngineCore device(engine::LoadModelRunner(DataPath("demo-model/model"), ro), cfg);
  engine::EngineCore host(
      std::make_unique<HostSampled>(engine::LoadModelRunner(DataPath("demo-model/model"), ro)),
      cfg);
  grammar::TokenizerVocab::HfOptions vo;
  for (int64_t e : device.info().eos_token_ids) vo.stop_ids.push_back(static_cast<int32_t>(e));
  vo.vocab_size = static_cast<size_t>(device.info().vocab_size);
  grammar::GrammarCompiler compiler(grammar::TokenizerVocab::FromHuggingFaceJson(
      ReadFile(DataPath("demo-model/model/tokenizer.json")), vo));
  std::vector<std::shared_ptr<const grammar::CompiledGrammar>> grammars = {
      compiler.CompileJsonSchema(R"({"type":"object","properties":{
        "colour":{"enum":["red","green","blue"]},"sides":{"type":"integer","minimum":0,
        "maximum":12},"name":{"type":"string","maxLength":12}},
        "required":["colour","sides","name"],"additionalProperties":false})"),
      compiler.CompileRegex("The shape is (red|green|blue)\\."),
      compiler.CompileJsonObject()};
  std::vector<engine::EngineRequest> reqs;
  uint64_t seed = 5;
  for (const DemoPrompt& p : DemoPrompts()) {
    if (p.inputs.images || p.inputs.videos) continue;
    for (size_t g = 0; g < grammars.size(); ++g) {
      engine::EngineRequest r;
      r.id = p.name + "/grammar" + std::to_string(g);
      r.prompt.assign(p.inputs.input_ids.begin(), p.inputs.input_ids.end());
      r.grammar = grammars[g];
      SamplingParams& s = r.sampling;
      s.seed = seed++;
      s.max_tokens = 96;
      s.temperature = 0.9;
      s.top_p = 0.95;
      s.logit_bias = {{static_cast<int32_t>(seed % 100), -100.0f}};
      for (int64_t e : device.info().eos_token_ids)
        s.eos_token_ids.push_back(static_cast<int32_t>(e));
      reqs.push_back(std::move(r));
    }
  }
  REQUIRE(!reqs.empty());
  const std::vector<Completion> got = Complete(device, reqs), want = Complete(host, reqs);
  int64_t tokens = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO(reqs[i].id);
    CHECK(got[i].tokens == want[i].tokens);
    grammar::GrammarMatcher m(reqs[i].grammar);
    for (int32_t t : got[i].tokens) {
      CHECK(m.AcceptToken(t));
      CHECK(t != reqs[i].sampling.logit_bias[0].first);
    }
    tokens += static_cast<int64_t>(got[i].tokens.size());
  }
  std::printf("  cuda structured output through EngineCore: %zu constrained requests, %lld tokens, "
              "each allowed by its grammar and equal to host sampling\n",
              reqs.size(), static_cast<long long>(tokens));
}

}  // namespace
}  // namespace m3::test
