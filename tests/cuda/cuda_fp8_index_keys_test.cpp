// FP8 index keys (RunnerOptions::fp8_index_keys) on the CUDA backend, at the released model's
// index shapes (the random real-head checkpoint: the FP8 scoring kernels need index head_dim and
// MSA block 128): a 2300-token prompt's MSA selections against the CPU backend's FP8 path (the
// twin) and against bf16 keys on the GPU, then greedy decoding through the decode graphs. The
// selections may differ only where block scores are within rounding of each other (bf16
// activations against float32, e4m3 keys against bf16): counted and bounded (H100, 2026-11-23:
// 8.6% of entries against the twin, 10.4% against bf16 keys). Models whose index
// shapes the GPU's FP8 kernels lack are refused at load, naming them.
#include <doctest/doctest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "engine/model_registry.h"
#include "shared/error.h"
#include "tests/cuda/real_head_checkpoint.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

struct Fp8Run {
  std::vector<int64_t> tokens;
  NamedTensors selections;
};

Fp8Run RunFp8(const std::string& device, bool fp8, const engine::ModelInputs& in) {
  engine::RunnerOptions ro;
  ro.device = device;
  ro.fp8_index_keys = fp8;
  auto model = engine::LoadModel(RealHeadCheckpoint(), {}, ro);
  engine::CaptureOptions capture;
  capture.block_indices = true;
  capture.all_logits = false;
  auto seq = model->NewSequence();
  Fp8Run r;
  r.selections = model->Prefill(*seq, in, capture).captured;
  engine::GenerateOptions g;
  g.max_new_tokens = 16;
  g.ignore_eos = true;
  r.tokens = engine::Generate(*model, in, g);
  return r;
}

double DifferingFraction(const Fp8Run& a, const Fp8Run& b) {
  REQUIRE(a.selections.size() == b.selections.size());
  REQUIRE(!a.selections.empty());
  int64_t total = 0, differ = 0;
  for (size_t i = 0; i < a.selections.size(); ++i) {
    const auto x = a.selections[i].second.as<int64_t>();
    const auto y = b.selections[i].second.as<int64_t>();
    REQUIRE(x.size() == y.size());
    for (size_t j = 0; j < x.size(); ++j) {
      ++total;
      differ += x[j] != y[j];
    }
  }
  return static_cast<double>(differ) / static_cast<double>(total);
}

TEST_CASE("FP8 index keys on the GPU: selections near the CPU twin's and bf16 keys', decode runs") {
  engine::ModelInputs in;
  std::mt19937 rng(11);
  for (int i = 0; i < 2300; ++i) in.input_ids.push_back(static_cast<int64_t>(rng() % 1000) + 4);
  const Fp8Run gpu_fp8 = RunFp8("cuda", true, in);
  const Fp8Run gpu_bf16 = RunFp8("cuda", false, in);
  const Fp8Run cpu_fp8 = RunFp8("cpu", true, in);
  const double vs_cpu = DifferingFraction(gpu_fp8, cpu_fp8);
  const double vs_bf16 = DifferingFraction(gpu_fp8, gpu_bf16);
  std::printf(
      "  FP8 index keys, 2300-token prompt: %.2f%% of selection entries differ from the "
      "CPU backend's FP8 path, %.2f%% from bf16 keys on the GPU\n",
      100 * vs_cpu, 100 * vs_bf16);
  // On random keys block maxima sit a few hundredths apart, inside e4m3's 2^-4 step: the kernel
  // test (cuda_indexer_kernels_test) finds 20% of (head, row) selections reordered, every one a
  // near-tie; broken keys would reorder nearly all.
  CHECK(vs_cpu <= 0.25);
  CHECK(vs_bf16 <= 0.25);
  CHECK(gpu_fp8.tokens.size() == 16);
}

TEST_CASE("FP8 index keys on the GPU: index shapes without FP8 kernels are refused by name") {
  engine::RunnerOptions ro;
  ro.device = "cuda";
  ro.fp8_index_keys = true;
  try {
    engine::LoadModel(DataPath("m3-tiny/model"), {}, ro);
    FAIL("loaded");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kUnsupported);
    CHECK(std::string(e.what()).find("need index_head_dim 128 and index_block_size 128") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace m3::test
