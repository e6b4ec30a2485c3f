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

#include "tests/cuda/demo_prompts.h"
#include "tests/engine/golden_cases.h"
#include "tests/engine/selection_run.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

SelectionRun RunWith(const std::string& dir, const engine::ModelInputs& in, bool fp8) {
  engine::RunnerOptions ro;
  ro.fp8_index_keys = fp8;
  return RunCapturingSelections(dir, ro, in, 8);
}

TEST_CASE("FP8 index keys: the demo model answers as with float keys") {
  for (const DemoPrompt& p : DemoPrompts()) {
    CAPTURE(p.name);
    const std::string dir = DataPath("demo-model/model");
    const SelectionRun f32 = RunWith(dir, p.inputs, false), fp8 = RunWith(dir, p.inputs, true);
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
      const SelectionRun f32 = RunWith(dir, g.Inputs(c), false),
                         fp8 = RunWith(dir, g.Inputs(c), true);
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
