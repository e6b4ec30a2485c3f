// The m3-engine runner: golden inputs through `logits` and `generate`, and every kind of bad
// input ending in a clear stderr message and a non-zero exit (never a crash).
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

namespace fs = std::filesystem;

std::string Engine() {
  return BinPath("m3-engine");
}
std::string TinyModel() {
  return DataPath("m3-tiny/model");
}

std::string WriteInputs(const std::string& dir, const NamedTensors& t) {
  std::string path = dir + "/in.safetensors";
  WriteSafetensors(path, t);
  return path;
}

HostTensor& Get(NamedTensors& t, const std::string& name) {
  for (auto& [n, v] : t)
    if (n == name) return v;
  throw std::runtime_error("no tensor " + name);
}

// Runs `logits` on inputs and expects exit 2 with `needle` in stderr.
void ExpectFailure(const NamedTensors& inputs, const std::string& needle,
                   const std::string& model = TinyModel()) {
  std::string dir = TempDir();
  ProcessResult r = RunProcess({Engine(), "logits", "--model", model, "--inputs",
                                WriteInputs(dir, inputs), "--output", dir + "/out.safetensors"});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find(needle) != std::string::npos);
}

TEST_CASE("logits on golden inputs matches the reference") {
  const GoldenSet& g = Golden("m3-tiny");
  for (const char* c : {"text", "image", "video"}) {
    std::string dir = TempDir();
    ProcessResult r = RunProcess({Engine(), "logits", "--model", TinyModel(), "--inputs",
                                  WriteInputs(dir, g.InputTensors(c)), "--output",
                                  dir + "/out.safetensors", "--capture"});
    INFO(c << " stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    SafetensorsFile out = SafetensorsFile::Open(dir + "/out.safetensors");
    CHECK(out.Get("logits").shape == g.ShapeOf(std::string(c) + ".logits"));
    CHECK(RelativeL2(ToFloat32(out.Get("logits"), "logits"),
                     g.Floats(std::string(c) + ".logits")) <= 1e-4);
    if (std::string(c) == "text") CHECK(out.Has("block_indices.layer1"));
    if (std::string(c) == "image") CHECK(out.Has("image.projector_out"));
  }
}

TEST_CASE("generate prints the greedy tokens as the last JSON line") {
  const GoldenSet& g = Golden("m3-tiny");
  std::string dir = TempDir();
  ProcessResult r = RunProcess({Engine(), "generate", "--model", TinyModel(), "--inputs",
                                WriteInputs(dir, g.InputTensors("image")), "--max-new-tokens", "12",
                                "--ignore-eos"});
  REQUIRE(r.exit_code == 0);
  std::string want = "{\"tokens\":[";
  auto ids = g.Ints("image.greedy_tokens");
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) want += ',';
    want += std::to_string(ids[i]);
  }
  want += "]}\n";
  CHECK(r.out.size() >= want.size());
  CHECK(r.out.substr(r.out.size() - want.size()) == want);
}

TEST_CASE("seeded sampling is reproducible and seeds matter") {
  const GoldenSet& g = Golden("m3-tiny");
  std::string dir = TempDir();
  std::string in = WriteInputs(dir, g.InputTensors("text"));
  auto run = [&](const std::string& seed) {
    ProcessResult r = RunProcess({Engine(), "generate", "--model", TinyModel(), "--inputs", in,
                                  "--max-new-tokens", "16", "--ignore-eos", "--temperature", "1.5",
                                  "--top-p", "0.95", "--top-k", "50", "--seed", seed});
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  std::string a = run("7");
  CHECK(a == run("7"));
  CHECK(a != run("8"));
}

TEST_CASE("bad model directories fail by name") {
  const GoldenSet& g = Golden("m3-tiny");
  NamedTensors text = g.InputTensors("text");
  std::string empty = TempDir();
  ExpectFailure(text, "config.json", empty);

  std::string bad_json = TempDir();
  WriteFile(bad_json + "/config.json", "{not json");
  ExpectFailure(text, "malformed", bad_json);

  std::string corrupt = TempDir();
  fs::copy_file(TinyModel() + "/config.json", corrupt + "/config.json");
  WriteFile(corrupt + "/model.safetensors", std::string("\x10\x00\x00\x00\x00\x00\x00\x00{", 9));
  ExpectFailure(text, "model.safetensors", corrupt);

  std::string no_weights = TempDir();
  fs::copy_file(TinyModel() + "/config.json", no_weights + "/config.json");
  ExpectFailure(text, "no model.safetensors", no_weights);

  // One weight with a wrong shape, then one with an integer dtype: both named.
  SafetensorsFile weights = SafetensorsFile::Open(TinyModel() + "/model.safetensors");
  for (int variant = 0; variant < 2; ++variant) {
    NamedTensors tensors;
    const std::string victim = "language_model.model.layers.2.self_attn.index_q_proj.weight";
    for (const auto& name : weights.Names()) {
      TensorView v = weights.Get(name);
      if (name == victim && variant == 0) {
        tensors.emplace_back(name,
                             HostTensor::FromFloat({v.shape[1], v.shape[0]}, ToFloat32(v, name)));
      } else if (name == victim) {
        tensors.emplace_back(name,
                             HostTensor::FromInt64(v.shape, std::vector<int64_t>(v.numel(), 1)));
      } else {
        HostTensor t(v.dtype, v.shape);
        std::memcpy(t.data(), v.data, v.nbytes);
        tensors.emplace_back(name, std::move(t));
      }
    }
    std::string dir = TempDir();
    fs::copy_file(TinyModel() + "/config.json", dir + "/config.json");
    WriteSafetensors(dir + "/model.safetensors", tensors);
    ExpectFailure(text, victim, dir);
  }
}

TEST_CASE("bad inputs fail with a message") {
  const GoldenSet& g = Golden("m3-tiny");
  SUBCASE("missing input_ids") {
    NamedTensors t = g.InputTensors("image");
    t.erase(t.begin());
    ExpectFailure(t, "input_ids");
  }
  SUBCASE("input_ids with a float dtype") {
    NamedTensors t;
    t.emplace_back("input_ids", HostTensor::FromFloat({3}, {1, 2, 3}));
    ExpectFailure(t, "integer");
  }
  SUBCASE("pixel_values with an integer dtype") {
    NamedTensors t = g.InputTensors("image");
    HostTensor& px = Get(t, "pixel_values");
    px = HostTensor::FromInt64(px.shape(), std::vector<int64_t>(px.numel(), 0));
    ExpectFailure(t, "float");
  }
  SUBCASE("token id out of range") {
    NamedTensors t = g.InputTensors("text");
    Get(t, "input_ids").as<int64_t>()[5] = 512;
    ExpectFailure(t, "outside the vocabulary");
    Get(t, "input_ids").as<int64_t>()[5] = -1;
    ExpectFailure(t, "outside the vocabulary");
  }
  SUBCASE("placeholder count differs from the vision tokens") {
    NamedTensors t = g.InputTensors("image");
    auto ids = Get(t, "input_ids").as<int64_t>();
    for (auto& id : ids)
      if (id == 500) {
        id = 7;
        break;
      }
    ExpectFailure(t, "do not match");
  }
  SUBCASE("placeholders without pixels") {
    NamedTensors t = g.InputTensors("image");
    t.resize(1);
    ExpectFailure(t, "no image pixels");
  }
  SUBCASE("grid not divisible by the merge size") {
    NamedTensors t = g.InputTensors("image");  // grid (1, 16, 16)
    auto grid = Get(t, "image_grid_thw").as<int64_t>();
    grid[1] = 256;  // 256 x 1 patches: still 256 rows, but 1 is not a multiple of 2
    grid[2] = 1;
    ExpectFailure(t, "divisible by the merge size");
  }
  SUBCASE("pixel rows do not match the grids") {
    NamedTensors t = g.InputTensors("video");
    auto grid = Get(t, "video_grid_thw").as<int64_t>();
    grid[0] += 1;
    ExpectFailure(t, "rows");
  }
  SUBCASE("grid without pixels") {
    NamedTensors t = g.InputTensors("image");
    t.erase(t.begin() + 1);  // pixel_values
    ExpectFailure(t, "without 'pixel_values'");
  }
  SUBCASE("inputs file that is not safetensors") {
    std::string dir = TempDir();
    WriteFile(dir + "/in.safetensors", "garbage");
    ProcessResult r = RunProcess({Engine(), "logits", "--model", TinyModel(), "--inputs",
                                  dir + "/in.safetensors", "--output", dir + "/o.safetensors"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("truncated") != std::string::npos);
  }
}

TEST_CASE("usage errors") {
  CHECK(RunProcess({Engine()}).exit_code == 64);
  CHECK(RunProcess({Engine(), "bogus"}).exit_code == 64);
  ProcessResult r = RunProcess({Engine(), "logits", "--model", TinyModel(), "--nope", "1"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("unknown option --nope") != std::string::npos);
  r = RunProcess({Engine(), "generate", "--model", TinyModel(), "--inputs", "x", "--top-p", "abc"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--top-p") != std::string::npos);
  r = RunProcess({Engine(), "generate", "--model", TinyModel(), "--inputs",
                  DataPath("demo/image_prompt.safetensors"), "--device", "tpu"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("device 'tpu' is not supported (known: cpu, cuda, cuda:N)") !=
        std::string::npos);
}

}  // namespace
}  // namespace m3::test
