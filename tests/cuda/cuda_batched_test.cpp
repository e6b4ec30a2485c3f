// Batched equals alone on the GPU: two prompts prefilled in one step (on pages interleaved with
// each other) and then decoded together give the logits each gives alone (within bf16 rounding:
// per-row kernels are batch-independent; cuBLAS may pick other GEMM tilings for other row
// counts) and the same greedy tokens.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>

#include "engine/model_registry.h"
#include "engine/step/model_runner.h"
#include "kernels/cpu/sampling.h"
#include "tests/cuda/paged_sequences.h"
#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Seq = PagedSeq;

constexpr int64_t kPage = 8;

// One step: every sequence runs its uncached tokens (decodes first: sequences with one).
std::vector<std::vector<float>> Step(engine::ModelRunner& runner, std::vector<Seq*> seqs) {
  std::stable_sort(seqs.begin(), seqs.end(), [](const Seq* a, const Seq* b) {
    return (a->tokens.size() - a->cached == 1) > (b->tokens.size() - b->cached == 1);
  });
  int32_t width = 0;
  for (const Seq* s : seqs) width = std::max(width, static_cast<int32_t>(s->pages.size()));
  const engine::ForwardBatch b = StepBatch(seqs, kPage, width);
  std::vector<float> logits;
  runner.Execute(b, logits);
  const int64_t V = runner.info().vocab_size;
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq* s = seqs[i];
    s->cached = static_cast<int32_t>(s->tokens.size());
    out.emplace_back(logits.begin() + i * V, logits.begin() + (i + 1) * V);
  }
  return out;  // in the step's order (decodes first); the callers keep theirs equal to it
}

TEST_CASE("GPU: two sequences batched give the logits and greedy tokens of each alone") {
  engine::RunnerOptions ro;
  ro.device = "cuda";
  auto runner = engine::LoadModelRunner(DataPath("m3-tiny/model"), ro);
  runner->AllocateKvCache(64, kPage);
  const int64_t V = runner->info().vocab_size;
  const std::vector<int64_t> ids = Golden("m3-tiny").Ints("text.input_ids");
  auto prompt = [&](size_t begin, size_t n) {
    std::vector<int32_t> p;
    for (size_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(ids[(begin + i) % ids.size()]));
    return p;
  };
  const int steps = 6;
  auto run = [&](Seq& s) {  // alone: prefill, then decodes
    std::vector<std::vector<float>> logits;
    for (int i = 0; i < steps; ++i) {
      logits.push_back(Step(*runner, {&s})[0]);
      s.tokens.push_back(static_cast<int32_t>(kernels::cpu::ArgMax(logits.back().data(), V)));
    }
    return logits;
  };
  Seq a{prompt(0, 45), {}, 0}, b{prompt(17, 29), {}, 0};
  for (int32_t p = 0; p < 8; ++p) a.pages.push_back(p);
  for (int32_t p = 8; p < 16; ++p) b.pages.push_back(p);
  const auto la = run(a), lb = run(b);

  Seq a2{prompt(0, 45), {}, 0}, b2{prompt(17, 29), {}, 0};
  for (int32_t p = 0; p < 8; ++p) {  // interleaved, other pages than alone
    a2.pages.push_back(63 - 2 * p);
    b2.pages.push_back(62 - 2 * p);
  }
  double worst = 0;
  for (int i = 0; i < steps; ++i) {
    // a2 first in the step's order when both prefill; decodes reorder nothing (both decode).
    auto both = Step(*runner, {&a2, &b2});
    worst = std::max({worst, RelativeL2(both[0], la[i]), RelativeL2(both[1], lb[i])});
    a2.tokens.push_back(static_cast<int32_t>(kernels::cpu::ArgMax(both[0].data(), V)));
    b2.tokens.push_back(static_cast<int32_t>(kernels::cpu::ArgMax(both[1].data(), V)));
  }
  std::printf(
      "  cuda batched vs alone (m3-tiny, 2 sequences, %d steps): worst logits rel L2 %.3e\n", steps,
      worst);
  CHECK(a2.tokens == a.tokens);
  CHECK(b2.tokens == b.tokens);
  CHECK(worst <= 2e-2);
}

}  // namespace
}  // namespace m3::test
