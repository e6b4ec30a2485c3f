// Quantized checkpoints on the CPU backend: the trained demo model written by `m3-engine
// quantize` in each released layout (MiniMax MXFP8; ModelOpt NVFP4 with routed experts and
// down projections; ModelOpt MIXED_PRECISION) gives the logits of the same quantized values
// dequantized to a float32 checkpoint within 1e-4 relative, and the same greedy tokens; both
// dense-MLP namings and sharded files load; a checkpoint the engine cannot load is refused
// before any upload, naming the tensor; dummy weights of a config alone run a forward pass in
// each format.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "engine/model_registry.h"
#include "shared/error.h"
#include "shared/json_file.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

namespace fs = std::filesystem;

// `m3-engine quantize` of the demo model (cached per argument list: each test reuses them).
std::string Quantized(const std::string& src, const std::string& format, bool dequantize,
                      const std::string& mlp_names = "keep") {
  static std::map<std::string, std::string> cache;
  const std::string key = src + "|" + format + "|" + std::to_string(dequantize) + "|" + mlp_names;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const std::string out = TempDir() + "/q";
  std::vector<std::string> argv = {BinPath("m3-engine"), "quantize", "--model",     src,
                                   "--output",           out,        "--format",    format,
                                   "--max-shard-size",   "1500KB",   "--mlp-names", mlp_names};
  if (dequantize) argv.push_back("--dequantize");
  const ProcessResult r = RunProcess(argv);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return cache[key] = out;
}

std::string Demo() {
  return DataPath("demo-model/model");
}

std::vector<float> Logits(const std::string& dir, const engine::ModelInputs& in,
                          const engine::RunnerOptions& ro = {}) {
  auto model = engine::LoadModel(dir, {}, ro);
  auto seq = model->NewSequence();
  return model->Prefill(*seq, in, {}).logits;
}

std::vector<int64_t> Greedy(const std::string& dir, const engine::ModelInputs& in) {
  auto model = engine::LoadModel(dir);
  engine::GenerateOptions opt;
  opt.max_new_tokens = 8;
  return engine::Generate(*model, in, opt);
}

double MaxRelative(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  return diff / scale;
}

// A copy of `src` (config files as they are) with its tensors in one model.safetensors,
// each rewritten by `edit` (name, tensor) -> keep?; `config_edit` rewrites config.json.
std::string Rewrite(const std::string& src,
                    const std::function<bool(const std::string&, HostTensor&)>& edit,
                    const std::function<void(nlohmann::json&)>& config_edit = {}) {
  const std::string dir = TempDir();
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string f = e.path().filename().string();
    if (f.ends_with(".safetensors") || f == "model.safetensors.index.json") continue;
    fs::copy_file(e.path(), dir + "/" + f);
  }
  if (config_edit) {
    nlohmann::json c = ParseJsonObject(ReadTextFile(dir + "/config.json"), "config.json");
    config_edit(c);
    WriteFile(dir + "/config.json", c.dump());
  }
  const WeightStore store = WeightStore::OpenDirectory(src);
  NamedTensors out;
  for (const std::string& name : store.Names()) {
    const TensorView v = store.Get(name);
    HostTensor t = HostTensor::Uninitialized(v.dtype, v.shape);
    std::copy(v.data, v.data + v.nbytes, t.data());
    if (edit(name, t)) out.emplace_back(name, std::move(t));
  }
  WriteSafetensors(dir + "/model.safetensors", out);
  return dir;
}

HostTensor Retyped(const HostTensor& t, DType d) {
  HostTensor r = HostTensor::Uninitialized(d, t.shape());
  std::copy(t.data(), t.data() + t.nbytes(), r.data());
  return r;
}

const std::string kExpert = "language_model.model.layers.2.block_sparse_moe.experts.3.";
const std::string kQProj = "language_model.model.layers.1.self_attn.q_proj.";

TEST_CASE("quantized demo checkpoints: the logits and greedy tokens of their dequantized weights") {
  const std::vector<DemoPrompt> prompts = DemoPrompts();
  for (const char* format : {"mxfp8", "nvfp4", "mixed"}) {
    CAPTURE(format);
    // The released dense-MLP names for one layout, transformers 5's for the others.
    const std::string names = std::string(format) == "nvfp4" ? "released" : "keep";
    const std::string q = Quantized(Demo(), format, false, names);
    const std::string ref = Quantized(Demo(), format, true, names);
    CHECK(fs::exists(q + "/model.safetensors.index.json"));  // several shards
    if (names == "released")
      CHECK(
          WeightStore::OpenDirectory(q).Has("language_model.model.layers.0.mlp.down_proj.weight"));
    for (size_t i = 0; i < prompts.size(); i += 2) {  // text and image prompts
      const DemoPrompt& p = prompts[i];
      CAPTURE(p.name);
      const std::vector<float> got = Logits(q, p.inputs), want = Logits(ref, p.inputs);
      const double rel = MaxRelative(got, want);
      const double vs_bf16 = MaxRelative(got, Logits(Demo(), p.inputs));
      std::printf(
          "  %s %s: max relative logit difference %.2g to the dequantized float32, "
          "%.2g to the original bf16\n",
          format, p.name.c_str(), rel, vs_bf16);
      CHECK(rel <= 1e-4);
      // The weights really were quantized: the original model's logits differ.
      CHECK(vs_bf16 > 1e-4);
      CHECK(Greedy(q, p.inputs) == Greedy(ref, p.inputs));
    }
  }
}

TEST_CASE("a quantized checkpoint the engine cannot load is refused naming the tensor") {
  const std::string mx = Quantized(Demo(), "mxfp8", false);
  const std::string nv = Quantized(Demo(), "nvfp4", false);
  auto refused = [](const std::string& dir, const std::string& what,
                    const engine::RunnerOptions& ro = {}) {
    CHECK_THROWS_WITH_AS(engine::LoadModelRunner(dir, ro), doctest::Contains(what.c_str()), Error);
  };
  // An unknown quantization method.
  refused(Rewrite(
              Demo(), [](const std::string&, HostTensor&) { return true; },
              [](nlohmann::json& c) {
                c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
              }),
          "quant_method 'gptq' is not supported");
  // FP8 of the other kind.
  refused(Rewrite(mx,
                  [](const std::string& n, HostTensor& t) {
                    if (n == kQProj + "weight") t = Retyped(t, DType::kF8E5M2);
                    return true;
                  }),
          "weight '" + kQProj + "weight' has dtype F8_E5M2, which is no weight layout");
  // Int8 weights.
  refused(Rewrite(Demo(),
                  [](const std::string& n, HostTensor& t) {
                    if (n == kQProj + "weight")
                      t = HostTensor(DType::kI8, {t.shape()[0], t.shape()[1]});
                    return true;
                  }),
          "weight '" + kQProj + "weight' has dtype I8");
  // An MXFP8 weight without its scales.
  refused(Rewrite(mx, [](const std::string& n,
                         HostTensor&) { return n != kExpert + "w2.weight_scale_inv"; }),
          "weight '" + kExpert + "w2.weight' is F8_E4M3 without its block scales");
  // An MXFP8 scale of the wrong shape.
  refused(Rewrite(mx,
                  [](const std::string& n, HostTensor& t) {
                    if (n == kQProj + "weight_scale_inv") t = HostTensor(DType::kU8, {192, 12});
                    return true;
                  }),
          "weight '" + kQProj + "weight_scale_inv' has shape [192, 12], expected [192, 6]");
  // An NVFP4 weight without its global scale.
  refused(Rewrite(nv, [](const std::string& n,
                         HostTensor&) { return n != kExpert + "w1.weight_scale_2"; }),
          "weight '" + kExpert + "w1.weight' is U8 without its NVFP4 scales");
  // Tensors of one format where the config says another.
  refused(Rewrite(
              mx, [](const std::string&, HostTensor&) { return true; },
              [&](nlohmann::json& c) {
                c["quantization_config"] =
                    ParseJsonObject(ReadTextFile(nv + "/config.json"), "nv")["quantization_config"];
              }),
          "weight 'language_model.model.layers.0.block_sparse_moe.down_proj.weight' is stored "
          "as MXFP8 but the quantization config");
  // Tensor-parallel column slices must hold whole blocks: the demo model's experts
  // (intermediate 96) split over 2 ranks leave 48 columns of w2, one and a half MXFP8 blocks.
  engine::RunnerOptions tp2;
  tp2.tensor_parallel = 2;
  refused(mx, "experts.0.w2.weight' is MXFP8 (blocks of 32 along K) but this rank's columns [",
          tp2);
}

TEST_CASE("fused parts stored in different formats are dequantized to one dense weight") {
  // q_proj of layer 1 as the float32 of its MXFP8 values, k / v / index projections MXFP8:
  // the fused QKV is loaded dense, the same model as the dequantized checkpoint.
  const std::string mx = Quantized(Demo(), "mxfp8", false);
  const std::string ref = Quantized(Demo(), "mxfp8", true);
  const WeightStore ref_store = WeightStore::OpenDirectory(ref);
  const std::string mixed = Rewrite(mx, [&](const std::string& n, HostTensor& t) {
    if (n == kQProj + "weight_scale_inv") return false;
    if (n == kQProj + "weight") {
      const TensorView v = ref_store.Get(n);
      t = HostTensor::Uninitialized(v.dtype, v.shape);
      std::copy(v.data, v.data + v.nbytes, t.data());
    }
    return true;
  });
  const engine::ModelInputs in = DemoPrompts()[0].inputs;
  CHECK(MaxRelative(Logits(mixed, in), Logits(ref, in)) <= 1e-4);
}

TEST_CASE("quantized checkpoints under tensor / expert parallelism: slices of the same model") {
  // NVFP4 blocks of 16 divide the demo model's 2-rank column slices (o_proj stays bf16).
  const std::string nv = Quantized(Demo(), "nvfp4", false);
  const std::string ref = Quantized(Demo(), "nvfp4", true);
  const engine::ModelInputs in = DemoPrompts()[0].inputs;
  const std::vector<float> want = Logits(ref, in);
  engine::RunnerOptions tp2;
  tp2.tensor_parallel = 2;
  CHECK(MaxRelative(Logits(nv, in, tp2), want) <= 1e-4);
  engine::RunnerOptions ep2;
  ep2.expert_parallel = 2;
  CHECK(MaxRelative(Logits(nv, in, ep2), want) <= 1e-4);
}

TEST_CASE("MTP layers and unused tensors are skipped, never an error") {
  const std::string nv = Quantized(Demo(), "nvfp4", false);
  const std::string with_mtp = Rewrite(nv, [](const std::string& n, HostTensor&) { return true; });
  {
    // Extra tensors: an MTP layer (quantized and not) and a KV-cache scale.
    const WeightStore store = WeightStore::OpenDirectory(with_mtp);
    NamedTensors all;
    for (const std::string& name : store.Names()) {
      const TensorView v = store.Get(name);
      HostTensor t = HostTensor::Uninitialized(v.dtype, v.shape);
      std::copy(v.data, v.data + v.nbytes, t.data());
      all.emplace_back(name, std::move(t));
    }
    const std::string m = "language_model.model.mtp.layers.0.";
    all.emplace_back(m + "eh_proj.weight", HostTensor(DType::kF8E5M2, {192, 384}));
    all.emplace_back(m + "enorm.weight", HostTensor(DType::kBF16, {192}));
    all.emplace_back("language_model.model.layers.0.self_attn.k_scale",
                     HostTensor::FromFloat({}, {1.0f}));
    WriteSafetensors(with_mtp + "/model.safetensors", all);
  }
  const engine::ModelInputs in = DemoPrompts()[0].inputs;
  CHECK(Logits(with_mtp, in) == Logits(nv, in));
}

// A model directory of config files alone (no safetensors).
std::string ConfigOnly(const std::string& src) {
  const std::string dir = TempDir();
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string f = e.path().filename().string();
    if (f.ends_with(".json") && f != "model.safetensors.index.json")
      fs::copy_file(e.path(), dir + "/" + f);
  }
  return dir;
}

TEST_CASE("dummy weights: a config alone runs a forward pass in each format") {
  engine::RunnerOptions dummy;
  dummy.dummy_weights = true;
  const engine::ModelInputs in = DemoPrompts()[0].inputs;
  const std::vector<float> dense = Logits(ConfigOnly(Demo()), in, dummy);
  for (const char* format : {"mxfp8", "nvfp4", "mixed"}) {
    CAPTURE(format);
    const std::string dir = ConfigOnly(Quantized(Demo(), format, false));
    const std::vector<float> got = Logits(dir, in, dummy);
    REQUIRE(got.size() == dense.size());
    CHECK(std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); }));
    CHECK(*std::max_element(got.begin(), got.end()) > *std::min_element(got.begin(), got.end()));
    // Drawn from the names: the same again; the quantized formats change the values.
    CHECK(Logits(dir, in, dummy) == got);
    CHECK(got != dense);
    // The ranks of a tensor-parallel group draw their slices and run together (where the
    // demo model's 2-rank column slices hold whole blocks: NVFP4's of 16).
    if (std::string(format) != "nvfp4") continue;
    engine::RunnerOptions tp2 = dummy;
    tp2.tensor_parallel = 2;
    const std::vector<float> split = Logits(dir, in, tp2);
    CHECK(std::all_of(split.begin(), split.end(), [](float x) { return std::isfinite(x); }));
  }
  // The runner reports the dummy weights' footprint as it would a checkpoint's.
  auto runner = engine::LoadModelRunner(ConfigOnly(Demo()), dummy);
  CHECK(runner->info().weight_bytes > 0);
}

TEST_CASE("m3-engine: --load-format and quantize refuse bad values naming the choices") {
  ProcessResult r = RunProcess({BinPath("m3-engine"), "generate", "--model", Demo(), "--inputs",
                                "unused.safetensors", "--load-format", "pt"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--load-format must be 'auto' or 'safetensors' or 'dummy', not 'pt'") !=
        std::string::npos);
  r = RunProcess({BinPath("m3-engine"), "quantize", "--model", Demo(), "--output", TempDir() + "/x",
                  "--format", "int4"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--format must be") != std::string::npos);
  // A quantized checkpoint is not quantized again.
  r = RunProcess({BinPath("m3-engine"), "quantize", "--model", Quantized(Demo(), "mxfp8", false),
                  "--output", TempDir() + "/x", "--format", "nvfp4"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("is already quantized") != std::string::npos);
}

}  // namespace
}  // namespace m3::test
