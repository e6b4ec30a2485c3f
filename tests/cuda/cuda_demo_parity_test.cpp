// The trained demo model on the GPU (bf16 weights and activations) against the CPU engine in
// float32 on the same checkpoint: prompt logits within 2e-2 relative L2 and identical greedy
// completions. A trained model's choices (MSA block top-k, MoE top-k, the greedy token) are
// rarely near-ties, unlike the random golden models', so bf16 rounding must not change them;
// MSA selections that still differ are counted and printed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>

#include "engine/generate.h"
#include "engine/model_registry.h"
#include "tests/cuda/demo_prompts.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

constexpr double kTol = 2e-2;

int64_t SelectionsDiffering(const NamedTensors& a, const NamedTensors& b, int64_t* total) {
  int64_t n = 0;
  for (const auto& [name, ta] : a) {
    if (name.rfind("block_indices.", 0) != 0) continue;
    for (const auto& [nb, tb] : b) {
      if (nb != name) continue;
      const int64_t k = ta.shape()[2];
      auto x = ta.as<int64_t>(), y = tb.as<int64_t>();
      for (size_t r = 0; r * k < x.size(); ++r) {
        std::vector<int64_t> u(x.begin() + r * k, x.begin() + (r + 1) * k);
        std::vector<int64_t> v(y.begin() + r * k, y.begin() + (r + 1) * k);
        std::sort(u.begin(), u.end());
        std::sort(v.begin(), v.end());
        n += u != v;
        ++*total;
      }
    }
  }
  return n;
}

TEST_CASE("demo model: bf16 on the GPU gives the f32 CPU engine's logits and greedy tokens") {
  const std::string dir = DataPath("demo-model/model");
  engine::RunnerOptions ro;
  ro.device = "cuda";
  auto gpu = engine::LoadModel(dir, {}, ro);
  auto cpu = engine::LoadModel(dir);
  double worst = 0;
  int64_t differing = 0, selections = 0;
  for (const DemoPrompt& p : DemoPrompts()) {
    INFO(p.name);
    engine::CaptureOptions cap;
    cap.block_indices = true;
    auto gs = gpu->NewSequence();
    auto cs = cpu->NewSequence();
    const engine::PrefillResult g = gpu->Prefill(*gs, p.inputs, cap);
    const engine::PrefillResult c = cpu->Prefill(*cs, p.inputs, cap);
    REQUIRE(g.rows == c.rows);
    const double err = RelativeL2(g.logits, c.logits);
    const int64_t v = gpu->vocab_size();
    const double last = RelativeL2(std::span(g.logits).subspan((g.rows - 1) * v),
                                   std::span(c.logits).subspan((c.rows - 1) * v));
    int64_t total = 0;
    const int64_t diff = SelectionsDiffering(g.captured, c.captured, &total);
    engine::GenerateOptions opt;
    opt.max_new_tokens = 24;
    const std::vector<int64_t> gt = engine::Generate(*gpu, p.inputs, opt);
    const std::vector<int64_t> ct = engine::Generate(*cpu, p.inputs, opt);
    std::printf(
        "  cuda demo %-34s %3lld rows: logits rel L2 %.3e (last row %.3e), MSA selections "
        "differing %lld of %lld, greedy %s (%zu tokens)\n",
        p.name.c_str(), static_cast<long long>(g.rows), err, last, static_cast<long long>(diff),
        static_cast<long long>(total), gt == ct ? "equal" : "DIFFERENT", ct.size());
    CHECK(err <= kTol);
    CHECK(gt == ct);
    worst = std::max(worst, err);
    differing += diff;
    selections += total;
  }
  std::printf("  cuda demo: worst logits rel L2 %.3e; MSA selections differing %lld of %lld\n",
              worst, static_cast<long long>(differing), static_cast<long long>(selections));
}

}  // namespace
}  // namespace m3::test
