// Tensor / expert parallelism on 2 GPUs (NCCL, one rank thread per GPU): tp 2, ep 2 and
// tp 2 + ep 2 on m3-tiny, m3-alt (ep 2), the demo model and random checkpoints at the real
// widths, each against the single GPU and the float32 CPU runner (parallel_checks.h,
// ParityTolerance), through the runner and through EngineCore (preemption, prefix hits); the
// same at 4 ranks on a machine with 4 GPUs. Its own main: exits 77 (skipped) where fewer than 2
// usable GPUs are present.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/make_device.h"
#include "engine/parallel/nccl_communicator.h"
#include "engine/parallel/rank_threads.h"
#include "shared/error.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/engine/golden_cases.h"
#include "tests/parallel/parallel_checks.h"

namespace m3::test {
namespace {

// The demo model is trained: the same greedy tokens as one GPU. The goldens' random weights
// leave many MSA / expert scores near-tied, which bf16 rounding in another summation order
// flips (one GPU is as far from float32 as two): held to the float32 CPU runner instead.
constexpr ParityTolerance kDemo{5e-2, 1e-1, true, 3, true};
constexpr ParityTolerance kRandom{5e-2, 1e-1, true, 3, false};

// The configurations of a group of 2 and of 4 ranks: tp, ep, both.
using Groups = std::array<Parallel, 3>;
constexpr Groups kTwo = {{{2, 1}, {1, 2}, {2, 2}}};
constexpr Groups kFour = {{{4, 1}, {1, 4}, {4, 4}}};

TEST_CASE("2 GPUs: demo model, tp 2 / ep 2 / tp 2 + ep 2 equal one GPU") {
  std::vector<engine::ModelInputs> prompts;
  for (const DemoPrompt& p : DemoPrompts()) prompts.push_back(p.inputs);
  EngineExercise exercised;
  for (Parallel p : kTwo) {
    CheckRunnerParity("demo-model", "cuda", prompts.back(), p, kDemo);
    exercised += CheckEngineParity("demo-model", "cuda", prompts, p, kDemo);
  }
  CHECK(exercised.preemptions > 0);
  CHECK(exercised.prefix_hit_tokens > 0);
}

// m3-tiny's goldens through the runner and EngineCore (preemption and prefix hits summed over
// the groups).
void CheckTiny(const Groups& groups) {
  const GoldenSet& tiny = Golden("m3-tiny");
  const std::vector<engine::ModelInputs> tiny_prompts = {
      tiny.Inputs("text"), tiny.Inputs("image"), tiny.Inputs("image2"), tiny.Inputs("video")};
  EngineExercise exercised;
  for (Parallel p : groups) {
    CheckRunnerParity("m3-tiny", "cuda", tiny.Inputs("image"), p, kRandom);
    exercised += CheckEngineParity("m3-tiny", "cuda", tiny_prompts, p, kRandom);
  }
  CHECK(exercised.preemptions > 0);
  CHECK(exercised.prefix_hit_tokens > 0);
}

TEST_CASE("2 GPUs: goldens (m3-tiny tp 2 / ep 2 / both, m3-alt ep 2) equal one GPU") {
  CheckTiny(kTwo);
  const GoldenSet& alt = Golden("m3-alt");
  CheckRunnerParity("m3-alt", "cuda", alt.Inputs("image"), {1, 2}, kRandom);
  CheckEngineParity(
      "m3-alt", "cuda",
      {alt.Inputs("text"), alt.Inputs("image"), alt.Inputs("image2"), alt.Inputs("video")}, {1, 2},
      kRandom);
}

// Random checkpoints at the real text widths (m3-make-random-checkpoint: full attention +
// dense MLP, then MSA + MoE layers; 64 / 4 heads, 128 experts, vocabulary 200064), made on the
// GPU machine by scripts/device/parallel_checks.sh, which names them in the environment: far
// too large to carry or to make in CI. Without them these cases say so and check nothing.
const char* RealWidthCheckpoint(const char* env) {
  const char* dir = std::getenv(env);
  if (dir == nullptr || *dir == '\0') {
    MESSAGE(env << " unset: this case needs a checkpoint made on the GPU machine "
                   "(scripts/device/parallel_checks.sh)");
    return nullptr;
  }
  return dir;
}

engine::ModelInputs RandomPrompt(int tokens) {
  engine::ModelInputs prompt;
  std::mt19937_64 rng(7);
  for (int i = 0; i < tokens; ++i) prompt.input_ids.push_back(static_cast<int64_t>(rng() % 200000));
  return prompt;
}

// 2 layers and a 2304-token prompt (18 MSA blocks: top-16 selects), held to the float32 CPU
// runner like the goldens: the parallel runner's last 16 prompt rows and every layer no further
// from float32 than 3x the single GPU's distance + 5e-2, the first layer's output within 2x the
// single GPU's distance. Greedy tokens are not compared: one GPU's MSA selections already
// differ from float32's in 7.5% of the entries (random index weights, near-tied block scores),
// and on 4 GPUs ep 4's decodes parted from one GPU's while tp 4's did not
// (docs/perf-log/parallel.md).
void CheckRealWidths2Layers(const Groups& groups) {
  const char* dir = RealWidthCheckpoint("M3_PARALLEL_CHECKPOINT_2L");
  if (!dir) return;
  constexpr ParityTolerance kRealWidth{5e-2, 1e-1, true, 3, false};
  const engine::ModelInputs prompt = RandomPrompt(2304);
  for (Parallel p : groups) CheckRunnerParity(dir, "cuda", prompt, p, kRealWidth, 16);
}

// 4 layers (3 MSA + MoE) and a 4096-token prompt, too slow for the float32 CPU runner: layer by
// layer against the single GPU (printed), the first layer's output within bf16 rounding.
void CheckRealWidths4Layers(const Groups& groups) {
  const char* dir = RealWidthCheckpoint("M3_PARALLEL_CHECKPOINT");
  if (!dir) return;
  const engine::ModelInputs prompt = RandomPrompt(4096);
  for (Parallel p : groups) CheckLayerwise(dir, "cuda", prompt, p, 16, 2e-2);
}

TEST_CASE("2 GPUs: a random 2-layer checkpoint at the real widths against float32") {
  CheckRealWidths2Layers(kTwo);
}

TEST_CASE("2 GPUs: a random 4-layer checkpoint at the real widths, layer by layer") {
  CheckRealWidths4Layers(kTwo);
}

// 4 ranks, one GPU each, where the machine has them: m3-tiny (4 heads over 2 KV heads: each
// rank keeps its query heads' KV group; 8 experts, 2 a rank) and the real widths (one KV and
// index head a rank, 32 experts a rank).
TEST_CASE("4 GPUs: m3-tiny and the real widths, tp 4 / ep 4 / both") {
  try {
    engine::backend::MakeDevice("cuda:3");
  } catch (const Error& e) {
    MESSAGE("fewer than 4 GPUs: " << e.what());
    return;
  }
  CheckTiny(kFour);
  CheckRealWidths2Layers(kFour);
  CheckRealWidths4Layers(kFour);
}

// The peer all-reduce (--all-reduce custom, what auto picks on NVLink) against NCCL alone on
// the same runner: on 2 GPUs the demo model (trained: the same greedy tokens), on 4 m3-tiny
// (the demo model's 6 heads do not split 4 ways; random weights: tokens may flip on near-ties
// where the sums round differently), and the random 4-layer checkpoint at the real widths (its
// prompt and decode logits; at 2 ranks the sums round the same way, so its greedy tokens must
// agree too).
void CheckPeerAllReduce(const Groups& groups, bool four) {
  const engine::ModelInputs small =
      four ? Golden("m3-tiny").Inputs("image") : DemoPrompts().back().inputs;
  for (Parallel p : groups)
    CheckAllReduceParity(four ? "m3-tiny" : "demo-model", small, p, 8, !four, 2e-2);
  const char* dir = RealWidthCheckpoint("M3_PARALLEL_CHECKPOINT");
  if (!dir) return;
  const engine::ModelInputs prompt = RandomPrompt(1024);
  for (Parallel p : groups) CheckAllReduceParity(dir, prompt, p, 8, !four, 2e-2, 16);
}

TEST_CASE("2 GPUs: peer all-reduce against NCCL alone, demo model and real widths") {
  CheckPeerAllReduce(kTwo, false);
}

TEST_CASE("4 GPUs: peer all-reduce against NCCL alone, m3-tiny and real widths") {
  try {
    engine::backend::MakeDevice("cuda:3");
  } catch (const Error& e) {
    MESSAGE("fewer than 4 GPUs: " << e.what());
    return;
  }
  CheckPeerAllReduce(kFour, true);
}

TEST_CASE(
    "2 GPUs: a rank failing while its peer waits in NCCL aborts the group instead of hanging") {
  using engine::parallel::NcclGroup;
  auto group = std::make_shared<NcclGroup>(std::vector<int>{0, 1});
  engine::parallel::RankThreads threads(2);
  threads.SetOnStuck([group] { group->Abort(); }, std::chrono::milliseconds(1000));
  std::vector<std::unique_ptr<engine::backend::Device>> be(2);
  std::vector<std::unique_ptr<engine::parallel::Communicator>> comm(2);
  std::vector<engine::backend::DeviceTensor> t(2);
  threads.Run([&](int r) {
    be[r] = engine::backend::MakeDevice("cuda:" + std::to_string(r));
    comm[r] = group->Bind(r, *be[r]);
    t[r] = be[r]->Alloc(DType::kF32, {4});
  });
  std::vector<std::vector<float>> got(2, std::vector<float>(4));
  threads.Run([&](int r) {
    const std::vector<float> ones(4, 1.0f + r);
    be[r]->Upload(ones.data(), t[r]);
    comm[r]->AllReduceSum(t[r]);
    be[r]->Download(t[r], got[r].data());
  });
  CHECK(got[0] == std::vector<float>(4, 3.0f));
  CHECK(got[1] == std::vector<float>(4, 3.0f));
  // Rank 0 waits on the GPU for an AllReduce rank 1 never joins.
  CHECK_THROWS_WITH(threads.Run([&](int r) {
    if (r == 1) throw Error(ErrorCode::kInternal, "rank 1 failed");
    comm[0]->Barrier();
  }),
                    "rank 1 failed");
  CHECK(threads.broken());
  CHECK_THROWS_AS(threads.Run([](int) {}), Error);
  CHECK_THROWS_WITH(comm[0]->AllReduceSum(t[0]),
                    "NCCL: the GPU group was aborted after a rank failed");
  comm.clear();
  t.clear();
  be.clear();
}

}  // namespace
}  // namespace m3::test

int main(int argc, char** argv) {
  // NVLink multicast (NVLS) stays off on the lent machines.
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  for (const char* device : {"cuda:0", "cuda:1"}) {
    try {
      m3::engine::backend::MakeDevice(device);
    } catch (const m3::Error& e) {
      std::printf("cuda_parallel_test SKIPPED: needs 2 GPUs; %s: %s\n", device, e.what());
      return 77;
    }
  }
  doctest::Context context(argc, argv);
  return context.run();
}
