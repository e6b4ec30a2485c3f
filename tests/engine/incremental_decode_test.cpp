// Incremental decoding (prefill, then one token at a time on the KV and index-key caches) must
// give the same logits as one full forward pass over the whole sequence, across block
// boundaries of the sparse layers.
#include <doctest/doctest.h>

#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

TEST_CASE("decode steps equal a full recompute") {
  for (const char* set : {"m3-tiny", "m3-alt"}) {
    const GoldenSet& g = Golden(set);
    const int64_t V = g.model->vocab_size();
    std::vector<int64_t> ids = g.Ints("text.input_ids");
    ids.resize(48);
    const int64_t prompt = 21, steps = static_cast<int64_t>(ids.size()) - prompt;

    engine::ModelInputs full;
    full.input_ids = ids;
    auto full_seq = g.model->NewSequence();
    engine::PrefillResult ref = g.model->Prefill(*full_seq, full, {});

    engine::ModelInputs head;
    head.input_ids.assign(ids.begin(), ids.begin() + prompt);
    auto seq = g.model->NewSequence();
    engine::PrefillResult pre = g.model->Prefill(*seq, head, {});
    double worst =
        RelativeL2(pre.logits, std::span<const float>(ref.logits).subspan(0, prompt * V));
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<float> step = g.model->Decode(*seq, ids[prompt + s]);
      auto want = std::span<const float>(ref.logits).subspan((prompt + s) * V, V);
      worst = std::max(worst, RelativeL2(step, want));
    }
    CHECK(seq->length() == static_cast<int64_t>(ids.size()));
    INFO(set);
    CHECK(worst <= 1e-5);
    RecordParity(std::string(set) + " decode-vs-full", worst);
  }
}

TEST_CASE("last-position-only prefill matches the full logits") {
  const GoldenSet& g = Golden("m3-tiny");
  engine::CaptureOptions last;
  last.all_logits = false;
  auto a = g.model->NewSequence();
  auto b = g.model->NewSequence();
  auto full = g.model->Prefill(*a, g.Inputs("image"), {});
  auto tail = g.model->Prefill(*b, g.Inputs("image"), last);
  REQUIRE(tail.rows == 1);
  const int64_t V = g.model->vocab_size();
  CHECK(RelativeL2(tail.logits,
                   std::span<const float>(full.logits).subspan((full.rows - 1) * V, V)) <= 1e-6);
}

}  // namespace
}  // namespace m3::test
