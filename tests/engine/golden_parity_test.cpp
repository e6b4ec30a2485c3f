// Parity of the CPU backend with the reference (transformers) outputs of both golden sets:
// logits, every decoder hidden state, sparse block selections, vision tower / projector
// outputs, and greedy tokens decoded incrementally with the caches.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "engine/generate.h"
#include "engine/minimax_m3/m3_config.h"
#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::minimax_m3::LoadModelConfig;
using engine::minimax_m3::ModelConfig;

// What the float32 CPU path reaches on every case (the goldens allow 1e-4).
constexpr double kTol = 1e-5;
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

// Image, two images in one prompt, and a video cut into vision segments.
TEST_CASE("vision cases: vision tower, projector, logits, greedy tokens") {
  for (const char* set : kSets) {
    const GoldenSet& g = Golden(set);
    for (const std::string prefix : {"image", "image2", "video"}) {
      engine::CaptureOptions cap;
      cap.vision = true;
      auto seq = g.model->NewSequence();
      engine::PrefillResult r = g.model->Prefill(*seq, g.Inputs(prefix), cap);
      const std::string kind = prefix == "video" ? "video" : "image";
      for (const std::string stage : {".vision_tower_out", ".projector_out"}) {
        const HostTensor* got = Find(r.captured, kind + stage);
        REQUIRE(got != nullptr);
        CheckClose(g, prefix + stage, got->shape(), Values(*got));
      }
      CheckClose(g, prefix + ".logits", {r.rows, g.model->vocab_size()}, r.logits);
      CheckGreedy(g, prefix);
    }
  }
}

// The vision encoder cache relies on this: each image (and each video segment) attends only to
// itself, so its features do not depend on what else the request holds.
TEST_CASE("an image encodes the same alone as inside a two-image request") {
  const GoldenSet& g = Golden("m3-tiny");
  const ModelConfig config = LoadModelConfig(DataPath("m3-tiny/model"));
  const engine::ModelInputs both = g.Inputs("image2");
  REQUIRE(both.images.has_value());
  REQUIRE(both.images->grids.size() == 2);
  std::vector<float> together = g.Floats("image2.vision_tower_out");
  const int64_t width = g.ShapeOf("image2.vision_tower_out")[1];
  int64_t row = 0;
  for (const auto& grid : both.images->grids) {
    const int64_t rows = grid[0] * grid[1] * grid[2];
    engine::ModelInputs alone;
    alone.images = engine::VisionInput{};
    alone.images->patch_dim = both.images->patch_dim;
    alone.images->rows = rows;
    alone.images->grids = {grid};
    alone.images->pixels.assign(
        both.images->pixels.begin() + row * both.images->patch_dim,
        both.images->pixels.begin() + (row + rows) * both.images->patch_dim);
    alone.input_ids.assign(static_cast<size_t>(rows / 4), config.image_token_id);
    engine::CaptureOptions cap;
    cap.all_logits = false;
    cap.vision = true;
    auto seq = g.model->NewSequence();
    engine::PrefillResult r = g.model->Prefill(*seq, alone, cap);
    const HostTensor* got = Find(r.captured, "image.vision_tower_out");
    REQUIRE(got != nullptr);
    std::vector<float> want(together.begin() + row * width,
                            together.begin() + (row + rows) * width);
    INFO("image at patch row " << row);
    CHECK(RelativeL2(Values(*got), want) <= kTol);
    row += rows;
  }
  CHECK(row == static_cast<int64_t>(together.size()) / width);
}

}  // namespace
}  // namespace m3::test
