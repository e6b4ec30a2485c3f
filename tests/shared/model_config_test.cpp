// config.json parsing: the golden checkpoints, the legacy key style, and bad files.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/model_config.h"
#include "tests/test_util.h"

TEST_CASE("the tiny golden config parses") {
  auto c = m3::LoadModelConfig(m3::test::DataPath("m3-tiny/model"));
  CHECK(c.text.hidden_size == 64);
  CHECK(c.text.head_dim == 32);
  CHECK(c.text.rotary_dim == 16);
  CHECK(c.text.sparse_attention == std::vector<bool>{false, true, true, true});
  CHECK(c.text.moe_mlp == std::vector<bool>{false, true, true, true});
  CHECK(c.text.index_block_size == 8);
  CHECK(c.text.eos_token_ids == std::vector<int64_t>{505});
  CHECK(c.vision.hidden_size == 64);
  CHECK(c.vision.patch_dim() == 1176);
  CHECK(c.image_token_id == 500);
  CHECK(c.video_token_id == 501);
  CHECK(c.projector_hidden_size == 96);
}

TEST_CASE("legacy keys give the same configuration as flat keys") {
  auto flat_text = m3::test::ReadFile(m3::test::DataPath("m3-tiny/model/config.json"));
  auto j = nlohmann::json::parse(flat_text);
  auto& t = j["text_config"];
  for (const char* k : {"index_n_heads", "index_head_dim", "index_block_size", "index_topk_blocks",
                        "index_local_blocks", "layer_types", "mlp_layer_types", "rope_parameters"})
    t.erase(k);
  t["sparse_attention_config"] = {
      {"sparse_num_index_heads", 2}, {"sparse_index_dim", 16},
      {"sparse_block_size", 8},      {"sparse_topk_blocks", 2},
      {"sparse_local_block", 1},     {"sparse_attention_freq", {0, 1, 1, 1}}};
  t["moe_layer_freq"] = {0, 1, 1, 1};
  t["rope_theta"] = 10000.0;
  t["rotary_dim"] = 16;
  auto legacy = m3::ParseModelConfig(j.dump(), "legacy");
  auto flat = m3::LoadModelConfig(m3::test::DataPath("m3-tiny/model"));
  CHECK(legacy.text.sparse_attention == flat.text.sparse_attention);
  CHECK(legacy.text.moe_mlp == flat.text.moe_mlp);
  CHECK(legacy.text.rotary_dim == flat.text.rotary_dim);
  CHECK(legacy.text.index_topk_blocks == flat.text.index_topk_blocks);
  CHECK(legacy.text.index_head_dim == flat.text.index_head_dim);
  CHECK(legacy.text.rope_theta == flat.text.rope_theta);
}

TEST_CASE("bad configs fail with the key named") {
  auto j =
      nlohmann::json::parse(m3::test::ReadFile(m3::test::DataPath("m3-tiny/model/config.json")));
  auto expect = [](const nlohmann::json& cfg, const char* fragment) {
    CHECK_THROWS_WITH_AS(m3::ParseModelConfig(cfg.dump(), "config.json"),
                         doctest::Contains(fragment), m3::Error);
  };
  CHECK_THROWS_WITH_AS(m3::ParseModelConfig("{not json", "config.json"),
                       doctest::Contains("malformed"), m3::Error);
  auto a = j;
  a["text_config"].erase("hidden_size");
  expect(a, "hidden_size");
  auto b = j;
  b["text_config"]["layer_types"] = {"full_attention"};
  expect(b, "layer_types");
  auto c = j;
  c["text_config"]["index_n_heads"] = 3;
  expect(c, "index_n_heads");
  auto d = j;
  d["text_config"]["num_attention_heads"] = "four";
  expect(d, "num_attention_heads");
  auto e = j;
  e.erase("vision_config");
  expect(e, "vision_config");
  auto f = j;
  f["image_token_index"] = 100000;
  expect(f, "image_token_index");
  CHECK_THROWS_AS(m3::LoadModelConfig("/nonexistent"), m3::Error);
}
