// Weight loading through WeightUploader: a checkpoint split into shards (index.json) loads to
// the same model as the single file, a bf16 copy loads with the same float32 footprint and is
// exactly the model of float32 weights holding the rounded values, and a missing or misshapen
// tensor is an error naming it.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "engine/model_registry.h"
#include "shared/error.h"
#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

namespace fs = std::filesystem;

// Copies m3-tiny into a temp directory: config files as they are, tensors rewritten by `edit`
// (name, tensor) -> keep?, split round-robin over `shards` files.
std::string CopyTiny(int shards, bool bf16,
                     const std::function<bool(const std::string&, HostTensor&)>& edit = {}) {
  const std::string src = DataPath("m3-tiny/model"), dir = TempDir();
  for (const char* f : {"config.json", "generation_config.json"})
    fs::copy_file(src + "/" + f, dir + "/" + f);
  SafetensorsFile in = SafetensorsFile::Open(src + "/model.safetensors");
  std::vector<NamedTensors> parts(shards);
  nlohmann::json map = nlohmann::json::object();
  int i = 0;
  for (const std::string& name : in.Names()) {
    TensorView v = in.Get(name);
    std::vector<float> f = ToFloat32(v, name);
    HostTensor t;
    if (bf16) {
      t = HostTensor::Uninitialized(DType::kBF16, v.shape);
      auto out = t.as<uint16_t>();
      for (size_t k = 0; k < f.size(); ++k) out[k] = F32ToBF16(f[k]);
    } else {
      t = HostTensor::FromFloat(v.shape, f);
    }
    if (edit && !edit(name, t)) continue;
    const std::string file = shards == 1 ? "model.safetensors"
                                         : "model-0000" + std::to_string(i % shards + 1) +
                                               "-of-0000" + std::to_string(shards) + ".safetensors";
    map[name] = file;
    parts[i % shards].emplace_back(name, std::move(t));
    ++i;
  }
  for (int s = 0; s < shards; ++s) {
    const std::string file = shards == 1 ? "model.safetensors"
                                         : "model-0000" + std::to_string(s + 1) + "-of-0000" +
                                               std::to_string(shards) + ".safetensors";
    WriteSafetensors(dir + "/" + file, parts[s]);
  }
  if (shards > 1)
    WriteFile(dir + "/model.safetensors.index.json",
              nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", map}}.dump());
  return dir;
}

std::vector<float> Logits(const std::string& dir, const engine::ModelInputs& in) {
  auto model = engine::LoadModel(dir);
  auto seq = model->NewSequence();
  return model->Prefill(*seq, in, {}).logits;
}

TEST_CASE("sharded and bf16 checkpoints load to the same model") {
  const GoldenSet& g = Golden("m3-tiny");
  const engine::ModelInputs in = g.Inputs("image");
  const std::vector<float> want = Logits(DataPath("m3-tiny/model"), in);

  const std::string sharded = CopyTiny(3, false);
  CHECK(Logits(sharded, in) == want);

  // bf16 is converted exactly: the same model as float32 weights holding the rounded values.
  const std::string bf16 = CopyTiny(2, true);
  const std::string rounded = CopyTiny(1, false, [](const std::string&, HostTensor& t) {
    for (float& x : t.as<float>()) x = BF16ToF32(F32ToBF16(x));
    return true;
  });
  auto f32_runner = engine::LoadModelRunner(DataPath("m3-tiny/model"));
  auto bf16_runner = engine::LoadModelRunner(bf16);
  CHECK(bf16_runner->info().weight_bytes == f32_runner->info().weight_bytes);
  const std::vector<float> got = Logits(bf16, in);
  CHECK(got == Logits(rounded, in));
  CHECK(got != want);  // the weights really were rounded
}

TEST_CASE("a missing or misshapen tensor is an error naming it") {
  const std::string name = "language_model.model.layers.2.block_sparse_moe.experts.5.w3.weight";
  const std::string missing =
      CopyTiny(2, false, [&](const std::string& n, HostTensor&) { return n != name; });
  CHECK_THROWS_WITH(engine::LoadModelRunner(missing),
                    doctest::Contains(("weight '" + name + "' is missing").c_str()));
  const std::string reshaped = CopyTiny(1, false, [&](const std::string& n, HostTensor& t) {
    if (n == name) t = HostTensor::FromFloat({16, 64}, std::vector<float>(16 * 64, 0.0f));
    return true;
  });
  CHECK_THROWS_WITH(
      engine::LoadModelRunner(reshaped),
      doctest::Contains(("weight '" + name + "' has shape [16, 64], expected [32, 64]").c_str()));
}

}  // namespace
}  // namespace m3::test
