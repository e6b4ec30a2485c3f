// ModelConfigView (the gateway's reading of config.json): the golden model directories, the
// released checkpoint's vision key spellings, generation_config.json's eos ids, bad files.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/model_config_view.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

TEST_CASE("model config view: the tiny golden model's ids, lengths and patch geometry") {
  const ModelConfigView c = LoadModelConfigView(DataPath("m3-tiny/model"));
  CHECK(c.model_type == "minimax_m3_vl");
  CHECK(c.text.vocab_size == 512);
  CHECK(c.text.max_position_embeddings == 4096);
  CHECK(c.text.bos_token_id == 504);
  CHECK(c.text.eos_token_ids == std::vector<int64_t>{505});
  CHECK(c.eos_token_ids() == std::vector<int64_t>{505});
  CHECK(c.image_token_id == 500);
  CHECK(c.video_token_id == 501);
  CHECK(c.vision.patch_size == 14);
  CHECK(c.vision.temporal_patch_size == 2);
  CHECK(c.vision.spatial_merge_size == 2);
  // generation_config.json's eos ids win where it names any.
  const ModelConfigView chat = LoadModelConfigView(DataPath("chat-e2e/model"));
  CHECK(chat.generation.eos_token_ids == std::vector<int64_t>{2});
  CHECK(chat.eos_token_ids() == std::vector<int64_t>{2});
}

TEST_CASE("model config view: the released checkpoint's vision keys and legacy token keys") {
  auto j = nlohmann::json::parse(ReadFile(DataPath("m3-tiny/model/config.json")));
  auto& v = j["vision_config"];
  v.erase("temporal_patch_size");
  v.erase("spatial_merge_size");
  v["img_token_compression_config"] = {{"temporal_patch_size", 3}, {"spatial_merge_size", 4}};
  j.erase("image_token_index");
  j["image_token_id"] = 7;
  j["text_config"]["eos_token_id"] = {3, 9};
  const ModelConfigView c = ParseModelConfigView(j.dump(), "config.json");
  CHECK(c.vision.temporal_patch_size == 3);
  CHECK(c.vision.spatial_merge_size == 4);
  CHECK(c.image_token_id == 7);
  CHECK(c.text.eos_token_ids == std::vector<int64_t>{3, 9});
}

TEST_CASE("model config view: bad files fail naming the key") {
  const auto j = nlohmann::json::parse(ReadFile(DataPath("m3-tiny/model/config.json")));
  auto expect = [](const nlohmann::json& cfg, const char* fragment) {
    CHECK_THROWS_WITH_AS(ParseModelConfigView(cfg.dump(), "config.json"),
                         doctest::Contains(fragment), Error);
  };
  auto no_text = j;
  no_text.erase("text_config");
  expect(no_text, "missing 'text_config'");
  auto no_vision = j;
  no_vision.erase("vision_config");
  expect(no_vision, "missing 'vision_config'");
  auto vocab = j;
  vocab["text_config"]["vocab_size"] = 0;
  expect(vocab, "'vocab_size' must be positive");
  auto patch = j;
  patch["vision_config"]["patch_size"] = "14";
  expect(patch, "'patch_size' must be an integer");
  CHECK_THROWS_AS(ParseModelConfigView("{not json", "config.json"), Error);
  CHECK_THROWS_AS(LoadModelConfigView("/nonexistent"), Error);
}

}  // namespace
}  // namespace m3::test
