// Parity of the CPU backend with the reference (transformers) outputs of both golden sets:
// logits, every decoder hidden state, sparse block selections, vision tower / projector
// outputs, and greedy tokens decoded incrementally with the caches.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "engine/generate.h"
#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

constexpr double kTol = 1e-4;
const char* const kSets[] = {"m3-tiny", "m3-alt"};

const HostTensor* Find(const NamedTensors& t, const std::string& name) {
  for (const auto& [n, v] : t)
    if (n == name) return &v;
  return nullptr;
}

void CheckClose(const GoldenSet& g, const std::string& key, const Shape& shape,
                const std::vector<float>& got) {
  INFO(g.name << " " << key);
  REQUIRE(shape == g.ShapeOf(key));
  double err = RelativeL2(got, g.Floats(key));
  RecordParity(g.name + " " + key, err);
  CHECK(err <= kTol);
}

std::vector<float> Values(const HostTensor& t) {
  auto s = t.as<float>();
  return {s.begin(), s.end()};
}

void CheckGreedy(const GoldenSet& g, const std::string& prefix) {
  std::vector<int64_t> want = g.Ints(prefix + ".greedy_tokens");
  engine::GenerateOptions opt;
  opt.max_new_tokens = static_cast<int64_t>(want.size());
  opt.ignore_eos = true;  // the reference used min_new_tokens
  INFO(g.name << " " << prefix << ".greedy_tokens");
  CHECK(engine::Generate(*g.model, g.Inputs(prefix), opt) == want);
}

TEST_CASE("text case: logits, hidden states, block selections, greedy tokens") {
  for (const char* set : kSets) {
    const GoldenSet& g = Golden(set);
    engine::CaptureOptions cap;
    cap.hidden_states = cap.block_indices = true;
    auto seq = g.model->NewSequence();
    engine::PrefillResult r = g.model->Prefill(*seq, g.Inputs("text"), cap);
    CheckClose(g, "text.logits", {r.rows, g.model->vocab_size()}, r.logits);

    int checked_hidden = 0, checked_blocks = 0;
    for (const std::string& key : g.cases.Names()) {
      if (key.rfind("text.hidden_states.", 0) == 0) {
        const HostTensor* got = Find(r.captured, key.substr(5));
        REQUIRE_MESSAGE(got != nullptr, key);
        CheckClose(g, key, got->shape(), Values(*got));
        ++checked_hidden;
      } else if (key.rfind("text.block_indices.", 0) == 0) {
        const HostTensor* got = Find(r.captured, key.substr(5));
        REQUIRE_MESSAGE(got != nullptr, key);
        Shape shape = g.ShapeOf(key);
        REQUIRE(got->shape() == shape);
        // The reference's top-k order among tied (+inf local) blocks is arbitrary: compare each
        // (head, query) row as a multiset, -1 slots included.
        std::vector<int64_t> want = g.Ints(key);
        auto have = got->as<int64_t>();
        const int64_t k = shape[2];
        int64_t mismatched_rows = 0;
        for (int64_t row = 0; row < shape[0] * shape[1]; ++row) {
          std::vector<int64_t> a(have.begin() + row * k, have.begin() + (row + 1) * k);
          std::vector<int64_t> b(want.begin() + row * k, want.begin() + (row + 1) * k);
          std::sort(a.begin(), a.end());
          std::sort(b.begin(), b.end());
          mismatched_rows += a != b;
        }
        INFO(g.name << " " << key);
        CHECK(mismatched_rows == 0);
        ++checked_blocks;
      }
    }
    CHECK(checked_hidden >= 2);
    CHECK(checked_blocks >= 1);
    CheckGreedy(g, "text");
  }
}

TEST_CASE("image case: vision tower, projector, logits, greedy tokens") {
  for (const char* set : kSets) {
    const GoldenSet& g = Golden(set);
    engine::CaptureOptions cap;
    cap.vision = true;
    auto seq = g.model->NewSequence();
    engine::PrefillResult r = g.model->Prefill(*seq, g.Inputs("image"), cap);
    for (const char* name : {"image.vision_tower_out", "image.projector_out"}) {
      const HostTensor* got = Find(r.captured, name);
      REQUIRE(got != nullptr);
      CheckClose(g, name, got->shape(), Values(*got));
    }
    CheckClose(g, "image.logits", {r.rows, g.model->vocab_size()}, r.logits);
    CheckGreedy(g, "image");
  }
}

TEST_CASE("video case: projector, logits") {
  for (const char* set : kSets) {
    const GoldenSet& g = Golden(set);
    engine::CaptureOptions cap;
    cap.vision = true;
    auto seq = g.model->NewSequence();
    engine::PrefillResult r = g.model->Prefill(*seq, g.Inputs("video"), cap);
    const HostTensor* got = Find(r.captured, "video.projector_out");
    REQUIRE(got != nullptr);
    CheckClose(g, "video.projector_out", got->shape(), Values(*got));
    CheckClose(g, "video.logits", {r.rows, g.model->vocab_size()}, r.logits);
  }
}

}  // namespace
}  // namespace m3::test
