// m3-bench-engine: serving throughput of the engine core on the CPU backend, batched against
// one request at a time in the same run. The model is a random MiniMax-M3 VL checkpoint wider
// than the goldens (hidden 512, 8 layers, 32 experts; written once to --checkpoint, BF16), the
// requests distinct random prompts decoded greedily with ignore_eos, so every run does the same
// work. For each concurrency C: "batched" submits C requests at once; "sequential" runs the
// same C requests one after another. Output tokens/s is all output tokens over the wall time;
// TTFT is submit -> first token per request (median). Median of --runs runs.
//   m3-bench-engine [--checkpoint DIR] [--prompt N] [--output N] [--runs N] [--conc 1,8,32]
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model_registry.h"
#include "engine/runtime/engine_core.h"
#include "shared/safetensors.h"
#include "tests/bench/random_m3_config.h"

namespace m3::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The benchmark model's shape: wide enough that batching matters the way it does on real MoE
// models (expert weights shared by the tokens routed to them), small enough for a laptop. Each
// token takes 8 of the 32 experts: the same quarter as m3-tiny (2 of 8).
constexpr int kHidden = 512, kLayers = 8, kExperts = 32, kTopK = 8, kExpertInter = 256;
constexpr int kSharedInter = 256, kDenseInter = 1024, kHeads = 8, kKvHeads = 2, kHeadDim = 64;
constexpr int kVocab = 8192, kIndexHeads = kKvHeads, kIndexHeadDim = 64, kIndexBlock = 16;
constexpr int kVisionHidden = 64, kVisionLayers = 2, kProjector = 256;

json Config() {
  RandomM3Shape m;
  m.hidden = kHidden;
  m.layers = kLayers;
  m.heads = kHeads;
  m.kv_heads = kKvHeads;
  m.head_dim = kHeadDim;
  m.experts = kExperts;
  m.topk = kTopK;
  m.expert_inter = kExpertInter;
  m.shared_inter = kSharedInter;
  m.dense_inter = kDenseInter;
  m.vocab = kVocab;
  m.index_heads = kIndexHeads;
  m.index_head_dim = kIndexHeadDim;
  m.index_block = kIndexBlock;
  m.index_topk = 8;
  m.max_position = 4096;
  m.vision_hidden = kVisionHidden;
  m.vision_layers = kVisionLayers;
  m.projector = kProjector;
  m.full_attention_every = 4;
  m.rope_theta = 10000.0;
  return RandomM3Config(m);
}

class Writer {
 public:
  explicit Writer(uint64_t seed) : rng_(seed) {}
  // Normal(0, std) weights (std 0: ones for norms, when `ones`), stored as BF16.
  void Add(const std::string& name, Shape shape, double stddev, bool ones = false) {
    HostTensor t(DType::kBF16, shape);
    auto* out = reinterpret_cast<uint16_t*>(t.data());
    std::normal_distribution<float> n(0.f, static_cast<float>(stddev));
    for (int64_t i = 0; i < t.view().numel(); ++i) {
      const float v = ones ? 1.f : (stddev == 0 ? 0.f : n(rng_));
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      out[i] = static_cast<uint16_t>(bits >> 16);
    }
    tensors.emplace_back(name, std::move(t));
  }
  NamedTensors tensors;

 private:
  std::mt19937 rng_;
};

void MakeCheckpoint(const std::string& dir) {
  const json config = Config();
  const std::string cfg_path = dir + "/config.json";
  if (std::filesystem::exists(cfg_path) && std::filesystem::exists(dir + "/model.safetensors")) {
    std::ifstream in(cfg_path);
    if (json::parse(in) == config) return;
  }
  std::filesystem::create_directories(dir);
  std::fprintf(stderr, "writing the random benchmark checkpoint to %s\n", dir.c_str());
  Writer w(1234);
  const double s = 0.02;
  const std::string L = "language_model.model.layers.";
  w.Add("language_model.model.embed_tokens.weight", {kVocab, kHidden}, 1.0);
  w.Add("language_model.lm_head.weight", {kVocab, kHidden}, s);
  w.Add("language_model.model.norm.weight", {kHidden}, 0, true);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = L + std::to_string(l) + ".";
    w.Add(p + "input_layernorm.weight", {kHidden}, 0, true);
    w.Add(p + "post_attention_layernorm.weight", {kHidden}, 0, true);
    w.Add(p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden}, s);
    w.Add(p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}, s);
    w.Add(p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}, s);
    w.Add(p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}, s);
    w.Add(p + "self_attn.q_norm.weight", {kHeadDim}, 0, true);
    w.Add(p + "self_attn.k_norm.weight", {kHeadDim}, 0, true);
    if (l % 4 != 0) {
      w.Add(p + "self_attn.index_q_proj.weight", {kIndexHeads * kIndexHeadDim, kHidden}, s);
      w.Add(p + "self_attn.index_k_proj.weight", {kIndexHeadDim, kHidden}, s);
      w.Add(p + "self_attn.index_q_norm.weight", {kIndexHeadDim}, 0, true);
      w.Add(p + "self_attn.index_k_norm.weight", {kIndexHeadDim}, 0, true);
    }
    const std::string m = p + "block_sparse_moe.";
    if (l == 0) {
      w.Add(m + "gate_proj.weight", {kDenseInter, kHidden}, s);
      w.Add(m + "up_proj.weight", {kDenseInter, kHidden}, s);
      w.Add(m + "down_proj.weight", {kHidden, kDenseInter}, s);
      continue;
    }
    w.Add(m + "gate.weight", {kExperts, kHidden}, s);
    w.Add(m + "e_score_correction_bias", {kExperts}, 0);
    for (int e = 0; e < kExperts; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      w.Add(x + "w1.weight", {kExpertInter, kHidden}, s);
      w.Add(x + "w3.weight", {kExpertInter, kHidden}, s);
      w.Add(x + "w2.weight", {kHidden, kExpertInter}, s);
    }
    w.Add(m + "shared_experts.gate_proj.weight", {kSharedInter, kHidden}, s);
    w.Add(m + "shared_experts.up_proj.weight", {kSharedInter, kHidden}, s);
    w.Add(m + "shared_experts.down_proj.weight", {kHidden, kSharedInter}, s);
  }
  const std::string V = "vision_tower.vision_model.";
  w.Add(V + "embeddings.patch_embedding.weight", {kVisionHidden, 3, 2, 14, 14}, s);
  w.Add(V + "pre_layrnorm.weight", {kVisionHidden}, 0, true);
  w.Add(V + "pre_layrnorm.bias", {kVisionHidden}, 0);
  for (int l = 0; l < kVisionLayers; ++l) {
    const std::string p = V + "encoder.layers." + std::to_string(l) + ".";
    for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      w.Add(p + "self_attn." + n + ".weight", {kVisionHidden, kVisionHidden}, s);
      w.Add(p + "self_attn." + n + ".bias", {kVisionHidden}, 0);
    }
    for (const char* n : {"layer_norm1", "layer_norm2"}) {
      w.Add(p + n + ".weight", {kVisionHidden}, 0, true);
      w.Add(p + n + ".bias", {kVisionHidden}, 0);
    }
    w.Add(p + "block_sparse_moe.fc1.weight", {2 * kVisionHidden, kVisionHidden}, s);
    w.Add(p + "block_sparse_moe.fc1.bias", {2 * kVisionHidden}, 0);
    w.Add(p + "block_sparse_moe.fc2.weight", {kVisionHidden, 2 * kVisionHidden}, s);
    w.Add(p + "block_sparse_moe.fc2.bias", {kVisionHidden}, 0);
  }
  w.Add("multi_modal_projector.linear_1.weight", {kProjector, kVisionHidden}, s);
  w.Add("multi_modal_projector.linear_1.bias", {kProjector}, 0);
  w.Add("multi_modal_projector.linear_2.weight", {kHidden, kProjector}, s);
  w.Add("multi_modal_projector.linear_2.bias", {kHidden}, 0);
  w.Add("patch_merge_mlp.linear_1.weight", {kProjector, 4 * kHidden}, s);
  w.Add("patch_merge_mlp.linear_1.bias", {kProjector}, 0);
  w.Add("patch_merge_mlp.linear_2.weight", {kHidden, kProjector}, s);
  w.Add("patch_merge_mlp.linear_2.bias", {kHidden}, 0);
  WriteSafetensors(dir + "/model.safetensors", w.tensors);
  std::ofstream(dir + "/generation_config.json") << json{{"eos_token_id", kVocab - 3}}.dump(2);
  std::ofstream(cfg_path) << config.dump(2);
}

struct Timing {
  Clock::time_point submit, first, done;
  int64_t tokens = 0;
};

class Tracker {
 public:
  engine::OutputSink Sink(size_t i) {
    return [this, i](engine::RequestOutput&& o) {
      std::lock_guard<std::mutex> lock(mu_);
      Timing& t = timings[i];
      if (t.tokens == 0 && !o.tokens.empty()) t.first = Clock::now();
      t.tokens += static_cast<int64_t>(o.tokens.size());
      if (o.finish != engine::FinishReason::kNone) {
        t.done = Clock::now();
        ++finished_;
        cv_.notify_all();
      }
    };
  }
  void WaitFinished(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return finished_ >= n; });
  }
  std::vector<Timing> timings;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t finished_ = 0;
};

engine::EngineRequest Request(size_t i, int prompt, int output, uint64_t salt) {
  std::mt19937_64 rng(i * 7919 + salt);
  engine::EngineRequest r;
  r.id = "bench-" + std::to_string(salt) + "-" + std::to_string(i);
  for (int k = 0; k < prompt; ++k) r.prompt.push_back(static_cast<int32_t>(rng() % (kVocab - 16)));
  r.sampling.temperature = 0;
  r.sampling.max_tokens = output;
  r.sampling.ignore_eos = true;
  return r;
}

struct Result {
  double tokens_per_s = 0, ttft_ms = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Result Run(engine::EngineCore& core, size_t conc, bool batched, int prompt, int output,
           uint64_t salt) {
  Tracker tr;
  tr.timings.resize(conc);
  const auto start = Clock::now();
  for (size_t i = 0; i < conc; ++i) {
    tr.timings[i].submit = Clock::now();
    core.Submit(Request(i, prompt, output, salt), tr.Sink(i));
    if (!batched) tr.WaitFinished(i + 1);
  }
  tr.WaitFinished(conc);
  Clock::time_point end = start;
  int64_t tokens = 0;
  std::vector<double> ttft;
  for (const Timing& t : tr.timings) {
    end = std::max(end, t.done);
    tokens += t.tokens;
    ttft.push_back(std::chrono::duration<double, std::milli>(t.first - t.submit).count());
  }
  Result r;
  r.tokens_per_s = tokens / std::chrono::duration<double>(end - start).count();
  r.ttft_ms = Median(ttft);
  return r;
}

int Main(int argc, char** argv) {
  std::string dir = "/tmp/m3-bench-engine-ckpt";
  int prompt = 128, output = 64, runs = 3;
  std::vector<size_t> concs = {1, 8, 32};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--checkpoint") {
      dir = v;
    } else if (k == "--prompt") {
      prompt = std::stoi(v);
    } else if (k == "--output") {
      output = std::stoi(v);
    } else if (k == "--runs") {
      runs = std::stoi(v);
    } else if (k == "--conc") {
      concs.clear();
      std::stringstream ss(v);
      for (std::string part; std::getline(ss, part, ',');) concs.push_back(std::stoul(part));
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 64;
    }
  }
  MakeCheckpoint(dir);
  const size_t max_conc = *std::max_element(concs.begin(), concs.end());
  engine::EngineConfig cfg;
  cfg.scheduler.max_num_seqs = static_cast<int64_t>(max_conc);
  cfg.scheduler.max_batched_tokens = 2048;
  cfg.prefix_caching = false;  // distinct prompts anyway; keeps runs independent
  cfg.page_size = kIndexBlock;
  cfg.kv_pages = static_cast<int64_t>(max_conc) * ((prompt + output) / kIndexBlock + 2);
  engine::EngineCore core(engine::LoadModelRunner(dir), cfg);
  Run(core, 2, true, 16, 4, 999);  // warm-up: first-touch of weights and buffers
  std::printf(
      "m3-bench-engine: hidden %d, %d layers, %d experts (top %d), vocab %d; prompt %d,"
      " output %d tokens, median of %d runs\n",
      kHidden, kLayers, kExperts, kTopK, kVocab, prompt, output, runs);
  std::printf("%-11s %-11s %14s %14s %9s\n", "concurrent", "mode", "output tok/s", "TTFT ms (p50)",
              "speedup");
  uint64_t salt = 0;
  for (size_t c : concs) {
    std::vector<double> tps[2], ttft[2];
    for (int r = 0; r < runs; ++r) {
      for (int mode = 0; mode < 2; ++mode) {
        Result res = Run(core, c, mode == 0, prompt, output, ++salt);
        tps[mode].push_back(res.tokens_per_s);
        ttft[mode].push_back(res.ttft_ms);
      }
    }
    const double seq = Median(tps[1]);
    std::printf("%-11zu %-11s %14.1f %14.1f %9s\n", c, "sequential", seq, Median(ttft[1]), "1.00x");
    std::printf("%-11zu %-11s %14.1f %14.1f %8.2fx\n", c, "batched", Median(tps[0]),
                Median(ttft[0]), Median(tps[0]) / seq);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace m3::bench

int main(int argc, char** argv) {
  return m3::bench::Main(argc, argv);
}
