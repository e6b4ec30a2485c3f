// Tensor / expert parallelism on 2 GPUs (NCCL, one rank thread per GPU): tp 2, ep 2 and
// tp 2 + ep 2 against the single-GPU runner on m3-tiny, m3-alt (ep 2) and the demo model, with
// the same greedy tokens and logits / logprobs within bf16 tolerance (the ranks' partial sums
// are rounded to bf16 before the AllReduce adds them). Its own main: exits 77 (skipped) where
// fewer than 2 usable GPUs are present.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "engine/backend/make_backend.h"
#include "shared/error.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/engine/golden_cases.h"
#include "tests/parallel/parallel_checks.h"

namespace m3::test {
namespace {

constexpr ParityTolerance kBf16{5e-2, 1e-1};

TEST_CASE("2 GPUs: demo model, tp 2 / ep 2 / tp 2 + ep 2 equal one GPU") {
  std::vector<engine::ModelInputs> prompts;
  for (const DemoPrompt& p : DemoPrompts()) prompts.push_back(p.inputs);
  EngineExercise exercised;
  for (Parallel p : {Parallel{2, 1}, Parallel{1, 2}, Parallel{2, 2}}) {
    CheckRunnerParity("demo-model", "cuda", prompts.back(), p, kBf16);
    exercised += CheckEngineParity("demo-model", "cuda", prompts, p, kBf16);
  }
  CHECK(exercised.preemptions > 0);
  CHECK(exercised.prefix_hit_tokens > 0);
}

TEST_CASE("2 GPUs: goldens (m3-tiny tp 2 / ep 2 / both, m3-alt ep 2) equal one GPU") {
  const GoldenSet& tiny = Golden("m3-tiny");
  const std::vector<engine::ModelInputs> tiny_prompts = {
      tiny.Inputs("text"), tiny.Inputs("image"), tiny.Inputs("image2"), tiny.Inputs("video")};
  EngineExercise exercised;
  for (Parallel p : {Parallel{2, 1}, Parallel{1, 2}, Parallel{2, 2}}) {
    CheckRunnerParity("m3-tiny", "cuda", tiny.Inputs("image"), p, kBf16);
    exercised += CheckEngineParity("m3-tiny", "cuda", tiny_prompts, p, kBf16);
  }
  CHECK(exercised.preemptions > 0);
  CHECK(exercised.prefix_hit_tokens > 0);
  const GoldenSet& alt = Golden("m3-alt");
  CheckRunnerParity("m3-alt", "cuda", alt.Inputs("image"), {1, 2}, kBf16);
  CheckEngineParity(
      "m3-alt", "cuda",
      {alt.Inputs("text"), alt.Inputs("image"), alt.Inputs("image2"), alt.Inputs("video")}, {1, 2},
      kBf16);
}

}  // namespace
}  // namespace m3::test

int main(int argc, char** argv) {
  // NVLink multicast (NVLS) stays off on the lent machines.
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  for (const char* device : {"cuda:0", "cuda:1"}) {
    try {
      m3::engine::backend::MakeBackend(device);
    } catch (const m3::Error& e) {
      std::printf("cuda_parallel_test SKIPPED: needs 2 GPUs; %s: %s\n", device, e.what());
      return 77;
    }
  }
  doctest::Context context(argc, argv);
  return context.run();
}
