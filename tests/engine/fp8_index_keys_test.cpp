// FP8 index keys (RunnerOptions::fp8_index_keys, `--index-key-cache fp8`) on the CPU backend,
// against the same model with float32 index keys: only the MSA selections read index keys, so
// every difference starts at a selection whose block scores were within the FP8 rounding of
// each other. The trained demo model keeps its greedy answers; on the random-weight goldens,
// where block scores are near-tied, most selections still agree; a bad option value is refused
// naming the choices.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "engine/model_registry.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

struct Run {
  std::vector<int64_t> tokens;
  NamedTensors selections;  // the prompt step's block_indices.layerN
};

Run RunWith(const std::string& dir, const engine::ModelInputs& in, bool fp8) {
  engine::RunnerOptions ro;
  ro.fp8_index_keys = fp8;
  auto model = engine::LoadModel(dir, {}, ro);
  engine::CaptureOptions capture;
  capture.block_indices = true;
  capture.all_logits = false;
  auto seq = model->NewSequence();
  Run r;
  r.selections = model->Prefill(*seq, in, capture).captured;
  engine::GenerateOptions g;
  g.max_new_tokens = 8;
  g.ignore_eos = true;
  r.tokens = engine::Generate(*model, in, g);
  return r;
}

// (entries compared, entries differing) over every captured selection.
std::pair<int64_t, int64_t> CompareSelections(const Run& a, const Run& b) {
  REQUIRE(a.selections.size() == b.selections.size());
  int64_t total = 0, differ = 0;
  for (size_t i = 0; i < a.selections.size(); ++i) {
    REQUIRE(a.selections[i].first == b.selections[i].first);
    const auto x = a.selections[i].second.as<int64_t>();
    const auto y = b.selections[i].second.as<int64_t>();
    REQUIRE(x.size() == y.size());
    for (size_t j = 0; j < x.size(); ++j) {
      // Entries past a row's visible blocks are -1 on both sides.
      CHECK((x[j] < 0) == (y[j] < 0));
      total += 1;
      differ += x[j] != y[j];
    }
  }
  return {total, differ};
}

TEST_CASE("FP8 index keys: the demo model answers as with float keys") {
  for (const DemoPrompt& p : DemoPrompts()) {
    CAPTURE(p.name);
    const std::string dir = DataPath("demo-model/model");
    const Run f32 = RunWith(dir, p.inputs, false), fp8 = RunWith(dir, p.inputs, true);
    const auto [total, differ] = CompareSelections(f32, fp8);
    std::printf("  demo-model %s: %lld of %lld selection entries differ with FP8 keys\n",
                p.name.c_str(), static_cast<long long>(differ), static_cast<long long>(total));
    CHECK(total > 0);
    CHECK(fp8.tokens == f32.tokens);
  }
}

TEST_CASE("FP8 index keys: the goldens' selections mostly agree with float keys") {
  for (const char* set : {"m3-tiny", "m3-alt"}) {
    for (const char* c : {"text", "image"}) {
      CAPTURE(set);
      CAPTURE(c);
      const GoldenSet& g = Golden(set);
      const std::string dir = DataPath(std::string(set) + "/model");
      const Run f32 = RunWith(dir, g.Inputs(c), false), fp8 = RunWith(dir, g.Inputs(c), true);
      const auto [total, differ] = CompareSelections(f32, fp8);
      std::printf("  %s %s: %lld of %lld selection entries differ with FP8 keys\n", set, c,
                  static_cast<long long>(differ), static_cast<long long>(total));
      CHECK(total > 0);
      // Random weights leave many block scores near-tied; quantization noise of e4m3 (a 2^-4
      // relative step) may reorder those, not the selections as a whole.
      CHECK(differ * 10 <= total);
      CHECK(fp8.tokens.size() == f32.tokens.size());
    }
  }
}

TEST_CASE("--index-key-cache: a bad value is refused naming the choices") {
  const ProcessResult r = RunProcess({BinPath("m3-engine"), "generate", "--model",
                                      DataPath("m3-tiny/model"), "--inputs", "unused.safetensors",
                                      "--max-new-tokens", "1", "--index-key-cache", "fp4"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--index-key-cache must be 'bf16' or 'fp8', not 'fp4'") != std::string::npos);
}

}  // namespace
}  // namespace m3::test
