// ModelRunner's checks at its boundary: malformed forward batches are kInvalidArgument errors
// naming the problem (and the runner keeps working after them), media splitting follows
// vision_segment_max_frames, Encode refuses non-finite pixels, runner info matches the config.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "engine/model_registry.h"
#include "shared/error.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

// m3-tiny: vocab 512, image token 500, MSA block 8, max_position_embeddings 4096.
struct Fixture {
  std::unique_ptr<engine::ModelRunner> runner = engine::LoadModelRunner(DataPath("m3-tiny/model"));
  Fixture() { runner->AllocateKvCache(16, 8); }

  // One prefill sequence of `rows` rows at `ctx` on pages 3, 7, 1, ... (then -1).
  static engine::ForwardBatch Valid(int32_t ctx = 0, int32_t rows = 3) {
    engine::ForwardBatch b;
    const std::vector<int32_t> pages = {3, 7, 1, 4};
    b.max_pages_per_seq = 4;
    b.block_tables = pages;
    b.query_start = {0, rows};
    b.context_lens = {ctx};
    for (int32_t i = 0; i < rows; ++i) {
      const int32_t pos = ctx + i;
      b.token_ids.push_back(10 + i);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(int64_t{pages[pos / 8]} * 8 + pos % 8);
    }
    b.logits_rows = {rows - 1};
    return b;
  }

  void Fails(const engine::ForwardBatch& b, const std::string& message) {
    std::vector<float> logits;
    try {
      runner->Execute(b, logits);
      FAIL("no error, expected: " << message);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kInvalidArgument);
      CHECK_MESSAGE(std::string(e.what()).find(message) != std::string::npos, e.what());
    }
  }
};

TEST_CASE("malformed forward batches are refused by name, and the runner keeps serving") {
  Fixture f;
  std::vector<float> logits;
  f.runner->Execute(Fixture::Valid(), logits);
  CHECK(logits.size() == 512);

  auto b = Fixture::Valid();
  b.token_ids[1] = 512;
  f.Fails(b, "token id 512 at row 1 is outside the vocabulary [0, 512)");
  b = Fixture::Valid();
  b.positions[2] = 5;
  f.Fails(b, "row 2 has position 5");
  b = Fixture::Valid();
  b.slot_mapping[0] = 0;
  f.Fails(b, "row 0 slot_mapping does not match its block table");
  b = Fixture::Valid();
  b.block_tables[0] = 16;
  f.Fails(b, "block table entry 0 = 16 is not a page of the cache [0, 16)");
  b = Fixture::Valid(6, 3);  // positions 6..8 need pages 0 and 1
  b.block_tables[1] = -1;
  f.Fails(b, "block table entry 1 = -1");
  b = Fixture::Valid();
  b.logits_rows = {2, 1};
  f.Fails(b, "logits_rows must be ascending");
  b = Fixture::Valid();
  b.num_decodes = 1;
  f.Fails(b, "decode sequence 0 has more than one row");
  b = Fixture::Valid();
  b.query_start = {0, 2};
  f.Fails(b, "query_start must run from 0 to the row count");
  b = Fixture::Valid();
  b.context_lens = {4094};
  b.max_pages_per_seq = 512;
  b.block_tables.assign(512, 2);
  for (int32_t i = 0; i < 3; ++i) {
    b.positions[i] = 4094 + i;
    b.slot_mapping[i] = 2 * 8 + (4094 + i) % 8;
  }
  f.Fails(b, "beyond max_position_embeddings 4096");
  b = Fixture::Valid();
  b.positions.pop_back();
  f.Fails(b, "one entry per row");

  // A media span must cover placeholder rows and stay inside its segment's features.
  const auto segs = f.runner->SplitMedia(false, {1, 2, 2});
  REQUIRE(segs.size() == 1);
  std::vector<float> pixels(4 * f.runner->info().patch_dim, 0.25f);
  auto features = f.runner->Encode(pixels.data(), segs[0]);
  CHECK(features->tokens() == 1);
  b = Fixture::Valid();
  b.media.push_back({1, 1, features, 0});
  f.Fails(b, "media span covers row 1, which is not an image / video placeholder");
  b.token_ids[1] = 500;
  b.media[0].offset = 1;
  f.Fails(b, "media span takes feature rows beyond its segment");
  b.media[0].offset = 0;
  f.runner->Execute(b, logits);
  CHECK(logits.size() == 512);
}

TEST_CASE("media splitting, pixel checks and runner info") {
  Fixture f;
  const engine::RunnerInfo& info = f.runner->info();
  CHECK(info.architecture == "minimax_m3_vl");
  CHECK(info.vocab_size == 512);
  CHECK(info.max_model_len == 4096);
  CHECK(info.image_token_id == 500);
  CHECK(info.msa_block_size == 8);
  CHECK(info.vision_segment_max_frames == 2);
  CHECK(info.patch_dim == 3 * 2 * 14 * 14);
  CHECK(info.weight_bytes > 0);

  // A 5-group video with segments of at most 2 groups: 2 + 2 + 1.
  auto segs = f.runner->SplitMedia(true, {5, 4, 6});
  REQUIRE(segs.size() == 3);
  CHECK(segs[0].grid_thw == std::array<int64_t, 3>{2, 4, 6});
  CHECK(segs[2].grid_thw == std::array<int64_t, 3>{1, 4, 6});
  CHECK(segs[1].patch_offset == 48);
  CHECK(segs[2].token_offset == 24);
  CHECK(segs[2].tokens == 6);
  // An image is one segment.
  CHECK(f.runner->SplitMedia(false, {1, 4, 6}).size() == 1);
  CHECK_THROWS_WITH(f.runner->SplitMedia(false, {1, 3, 6}),
                    doctest::Contains("divisible by the merge size 2"));
  CHECK_THROWS_WITH(f.runner->SplitMedia(true, {0, 4, 6}), doctest::Contains("must be positive"));

  std::vector<float> pixels(4 * info.patch_dim, 0.5f);
  pixels[info.patch_dim + 7] = std::numeric_limits<float>::quiet_NaN();
  const auto one = f.runner->SplitMedia(false, {1, 2, 2});
  CHECK_THROWS_WITH(f.runner->Encode(pixels.data(), one[0]),
                    doctest::Contains("pixel_values[1, 7] is not a finite number"));

  CHECK_THROWS_WITH(engine::LoadModelRunner(DataPath("m3-tiny/model"), {"tpu"}),
                    doctest::Contains("device 'tpu' is not supported"));
  CHECK_THROWS_WITH(f.runner->AllocateKvCache(4, 3),
                    doctest::Contains("page size 3 does not divide the MSA block size 8"));
}

}  // namespace
}  // namespace m3::test
