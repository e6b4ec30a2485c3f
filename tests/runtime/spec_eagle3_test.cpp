// EAGLE-3 drafts (vLLM's llama_eagle3 format) on the host: a random draft for the demo model,
// written here in the published layout (own or shared embeddings, a reduced vocabulary with
// d2t), loaded and run: its catch-up over many rows at once equals row by row (its KV), the
// engine with it emits the greedy and seeded tokens of plain decoding (batched, preemption),
// and drafts that do not fit the target are refused naming the problem.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "engine/model_registry.h"
#include "engine/runtime/engine_core.h"
#include "engine/spec/eagle3_proposer.h"
#include "shared/error.h"
#include "shared/safetensors.h"
#include "tests/engine_server/engine_test_util.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::spec::Eagle3DraftModel;

constexpr int64_t kTargetVocab = 439, kTargetHidden = 192, kTargetLayers = 4;

struct DraftShape {
  int64_t hidden = kTargetHidden;
  bool own_embedding = false;
  int64_t draft_vocab = 120;
  std::string aux = "[1, 2, 3]";
};

// A random draft in the published layout under `dir`.
void WriteDraft(const std::string& dir, const DraftShape& s, uint64_t seed = 3) {
  const int64_t H = s.hidden, heads = 4, kv = 2, D = 32, I = 256;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  auto random = [&](std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng);
    return HostTensor::FromFloat(shape, std::move(v));
  };
  auto ones = [&](int64_t n) {
    return HostTensor::FromFloat({n}, std::vector<float>(static_cast<size_t>(n), 1.0f));
  };
  NamedTensors t;
  t.emplace_back("fc.weight", random({H, 3 * kTargetHidden}));
  t.emplace_back("midlayer.input_layernorm.weight", ones(H));
  t.emplace_back("midlayer.hidden_norm.weight", ones(H));
  t.emplace_back("midlayer.self_attn.q_proj.weight", random({heads * D, 2 * H}));
  t.emplace_back("midlayer.self_attn.k_proj.weight", random({kv * D, 2 * H}));
  t.emplace_back("midlayer.self_attn.v_proj.weight", random({kv * D, 2 * H}));
  t.emplace_back("midlayer.self_attn.o_proj.weight", random({H, heads * D}));
  t.emplace_back("midlayer.post_attention_layernorm.weight", ones(H));
  t.emplace_back("midlayer.mlp.gate_proj.weight", random({I, H}));
  t.emplace_back("midlayer.mlp.up_proj.weight", random({I, H}));
  t.emplace_back("midlayer.mlp.down_proj.weight", random({H, I}));
  t.emplace_back("norm.weight", ones(H));
  t.emplace_back("lm_head.weight", random({s.draft_vocab, H}));
  if (s.own_embedding) t.emplace_back("embed_tokens.weight", random({kTargetVocab, H}));
  // The draft vocabulary: every third target id (d2t holds target - draft offsets).
  std::vector<int64_t> d2t;
  for (int64_t d = 0; d < s.draft_vocab; ++d) d2t.push_back(3 * d + 2 - d);
  t.emplace_back("d2t", HostTensor::FromInt64({s.draft_vocab}, d2t));
  WriteSafetensors(dir + "/model.safetensors", t);
  WriteFile(
      dir + "/config.json",
      "{\"architectures\": [\"LlamaForCausalLMEagle3\"], \"hidden_size\": " + std::to_string(H) +
          ", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 32, "
          "\"intermediate_size\": 256, \"num_hidden_layers\": 1, \"rms_norm_eps\": 1e-5, "
          "\"rope_theta\": 10000, \"vocab_size\": 439, \"draft_vocab_size\": " +
          std::to_string(s.draft_vocab) + ", \"target_hidden_size\": 192, " +
          "\"eagle_config\": {\"eagle_aux_hidden_state_layer_ids\": " + s.aux + "}}");
}

std::string DemoDir() {
  return DataPath("demo-model/model");
}

std::vector<engine::EngineRequest> Requests(bool sampled) {
  const std::vector<int32_t> frame = {3,   1,   94,  100, 94, 324, 88, 210, 399, 382,
                                      268, 431, 438, 25,  2,  210, 1,  96,  411, 210};
  const std::vector<std::vector<int32_t>> bodies = {
      {343, 285, 270, 268, 271, 76, 312, 42}, {372, 340, 434, 25}, {343, 351, 270, 340, 42}};
  std::vector<engine::EngineRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    engine::EngineRequest r;
    r.id = "e";
    r.id += std::to_string(i);
    r.prompt = frame;
    const auto& b = bodies[static_cast<size_t>(i) % bodies.size()];
    r.prompt.insert(r.prompt.end(), b.begin(), b.end());
    for (int32_t t : {2, 210, 1, 76, 84, 210, 4, 210}) r.prompt.push_back(t);
    r.sampling.max_tokens = 30 + 6 * i;
    r.sampling.ignore_eos = true;
    r.sampling.temperature = sampled ? 0.9 : 0.0;
    r.sampling.seed = 11 + static_cast<uint64_t>(i);
    reqs.push_back(std::move(r));
  }
  return reqs;
}

struct Run {
  std::map<std::string, std::vector<int32_t>> tokens;
  engine::EngineStats stats;
};

Run RunEngine(engine::EngineConfig cfg, const std::vector<engine::EngineRequest>& reqs) {
  engine::RunnerOptions ro;
  engine::EngineCore e(engine::LoadModelRunner(DemoDir(), ro), cfg);
  Collector col;
  for (const auto& r : reqs) e.Submit(r, col.Sink(r.id));
  Run run;
  for (const auto& r : reqs) {
    const Collected c = col.Wait(r.id);
    CHECK(c.error == "");
    run.tokens[r.id] = c.tokens;
  }
  for (int i = 0; i < 2000 && (!e.Idle() || e.Stats().running); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  run.stats = e.Stats();
  CHECK(run.stats.kv_pages_used == 0);
  return run;
}

}  // namespace

TEST_CASE("EAGLE-3 draft: catching up over many rows equals one row at a time") {
  const std::string dir = TempDir();
  WriteDraft(dir, {.hidden = 64, .own_embedding = true});
  const auto model =
      engine::spec::LoadEagle3Draft(dir, "", kTargetLayers, kTargetHidden, kTargetVocab);
  CHECK(model->has_own_embedding());
  constexpr int64_t kRows = 9;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> aux(kRows * 3 * kTargetHidden);
  for (float& x : aux) x = normal(rng);
  std::vector<float> fused(kRows * 64);
  model->Fuse(aux.data(), kRows, fused.data());
  std::vector<int32_t> ids;
  std::vector<int64_t> pos;
  for (int64_t r = 0; r < kRows; ++r) {
    ids.push_back(static_cast<int32_t>(17 * r % kTargetVocab));
    pos.push_back(r);
  }
  engine::spec::DraftKv all, one;
  std::vector<float> pre_all, pre_one;
  std::vector<int32_t> next_all, next_one;
  model->Forward(all, ids, pos, fused.data(), pre_all, next_all);
  for (int64_t r = 0; r < kRows; ++r) {
    model->Forward(one, std::span<const int32_t>(ids).subspan(r, 1),
                   std::span<const int64_t>(pos).subspan(r, 1), fused.data() + r * 64, pre_one,
                   next_one);
    CAPTURE(r);
    CHECK(next_one[0] == next_all[static_cast<size_t>(r)]);
    CHECK(RelativeL2(pre_one, std::span<const float>(pre_all).subspan(r * 64, 64)) < 1e-5);
    CHECK((next_one[0] - 2) % 3 == 0);  // drafts are target ids of the reduced vocabulary
  }
  // Truncating forgets what the rows after wrote: recomputing the last row gives its output.
  all.Truncate(kRows - 1);
  model->Forward(all, std::span<const int32_t>(ids).subspan(kRows - 1, 1),
                 std::span<const int64_t>(pos).subspan(kRows - 1, 1),
                 fused.data() + (kRows - 1) * 64, pre_one, next_one);
  CHECK(RelativeL2(pre_one, std::span<const float>(pre_all).subspan((kRows - 1) * 64, 64)) < 1e-5);
}

TEST_CASE("EAGLE-3 speculation equals plain decoding on the demo model (greedy, seeded)") {
  const std::string dir = TempDir();
  WriteDraft(dir, {});  // shares the demo model's embeddings
  for (bool sampled : {false, true}) {
    CAPTURE(sampled);
    const auto reqs = Requests(sampled);
    for (int64_t pages : {int64_t{128}, int64_t{9}}) {
      CAPTURE(pages);
      engine::EngineConfig cfg;
      cfg.kv_pages = pages;
      cfg.prefix_caching = pages > 100;
      const Run plain = RunEngine(cfg, reqs);
      cfg.speculative.method = engine::spec::SpeculativeMethod::kEagle3;
      cfg.speculative.model_dir = dir;
      cfg.speculative.target_model_dir = DemoDir();
      cfg.speculative.num_speculative_tokens = 3;
      cfg.speculative.backoff = false;
      const Run spec = RunEngine(cfg, reqs);
      for (const auto& r : reqs) {
        CAPTURE(r.id);
        CHECK(spec.tokens.at(r.id) == plain.tokens.at(r.id));
      }
      MESSAGE("eagle3 (random draft) sampled="
              << sampled << " pages=" << pages << ": accepted " << spec.stats.spec_accepted
              << " of " << spec.stats.spec_proposed << ", preemptions " << spec.stats.preemptions);
      CHECK(spec.stats.spec_proposed > 0);
      if (pages < 20) CHECK(spec.stats.preemptions > 0);
    }
  }
}

TEST_CASE("EAGLE-3 proposer: after a verify it drafts as if it had seen the kept rows at once") {
  const std::string dir = TempDir();
  WriteDraft(dir, {.hidden = 64, .own_embedding = true});
  const auto model =
      engine::spec::LoadEagle3Draft(dir, "", kTargetLayers, kTargetHidden, kTargetVocab);
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal;
  // Per aux layer, 13 rows of target hidden states.
  std::vector<std::vector<float>> hidden(3, std::vector<float>(13 * kTargetHidden));
  for (auto& h : hidden)
    for (float& x : h) x = normal(rng);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 11; ++i) tokens.push_back(static_cast<int32_t>(31 * i % kTargetVocab));
  auto observed = [&](int64_t first, int64_t rows) {
    engine::spec::ObservedRows o;
    o.id = "a";
    o.tokens = tokens;
    o.first_position = first;
    o.rows = rows;
    for (const auto& h : hidden) o.hidden.push_back(h.data() + first * kTargetHidden);
    return o;
  };
  // Prefill: positions 0..9 (token 10 sampled), then 3 drafts.
  engine::spec::Eagle3Proposer stepped(model);
  std::vector<engine::spec::ObservedRows> obs = {observed(0, 10)};
  stepped.Observe(obs);
  std::vector<std::vector<int32_t>> drafts;
  std::vector<engine::spec::DraftRequest> req = {{"a", tokens, 5, 3}};
  stepped.Propose(req, drafts);
  REQUIRE(drafts[0].size() == 3);
  // The verify kept 3 rows (positions 10..12): 2 drafts accepted and the target's next token.
  tokens.push_back(drafts[0][0]);
  tokens.push_back(drafts[0][1]);
  tokens.push_back(7);
  obs = {observed(10, 3)};
  stepped.Observe(obs);
  req = {{"a", tokens, 5, 3}};
  std::vector<std::vector<int32_t>> after;
  stepped.Propose(req, after);
  // A proposer that saw positions 0..12 in one catch-up.
  engine::spec::Eagle3Proposer fresh(model);
  obs = {observed(0, 13)};
  fresh.Observe(obs);
  std::vector<std::vector<int32_t>> once;
  fresh.Propose(req, once);
  CHECK(after[0].size() == 3);
  CHECK(after[0] == once[0]);
  // Out of step (the sequence moved on without an Observe): no drafts rather than wrong ones.
  tokens.push_back(8);
  req = {{"a", tokens, 5, 3}};
  stepped.Propose(req, after);
  CHECK(after[0].empty());
  // Retain forgets sequences that ended.
  stepped.Retain({});
  tokens.pop_back();
  req = {{"a", tokens, 5, 3}};
  stepped.Propose(req, after);
  CHECK(after[0].empty());
}

TEST_CASE("EAGLE-3 drafts that do not fit the target are refused, naming the problem") {
  const std::string dir = TempDir();
  WriteDraft(dir, {.aux = "[1, 2, 9]"});
  CHECK_THROWS_WITH_AS(
      engine::spec::LoadEagle3Draft(dir, DemoDir(), kTargetLayers, kTargetHidden, kTargetVocab),
      doctest::Contains("layer 9 is not a layer of the 4-layer target"), Error);
  const std::string narrow = TempDir();
  WriteDraft(narrow, {.hidden = 64});  // no embeddings of its own, narrower than the target
  CHECK_THROWS_WITH_AS(
      engine::spec::LoadEagle3Draft(narrow, DemoDir(), kTargetLayers, kTargetHidden, kTargetVocab),
      doctest::Contains("has no embed_tokens"), Error);
  CHECK_THROWS_WITH_AS(
      engine::spec::LoadEagle3Draft(dir, DemoDir(), kTargetLayers, kTargetHidden, 500),
      doctest::Contains("vocab_size 439 differs"), Error);
}

}  // namespace m3::test
