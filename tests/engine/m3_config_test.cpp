// The MiniMax-M3 config.json parser (engine/minimax_m3/m3_config.h): the golden checkpoints,
// the legacy key style, and bad files.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "engine/minimax_m3/m3_config.h"
#include "shared/error.h"
#include "tests/test_util.h"

using m3::engine::minimax_m3::LoadModelConfig;
using m3::engine::minimax_m3::ParseModelConfig;

TEST_CASE("the tiny golden config parses") {
  auto c = LoadModelConfig(m3::test::DataPath("m3-tiny/model"));
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
  auto legacy = ParseModelConfig(j.dump(), "legacy");
  auto flat = LoadModelConfig(m3::test::DataPath("m3-tiny/model"));
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
    CHECK_THROWS_WITH_AS(ParseModelConfig(cfg.dump(), "config.json"), doctest::Contains(fragment),
                         m3::Error);
  };
  CHECK_THROWS_WITH_AS(ParseModelConfig("{not json", "config.json"), doctest::Contains("malformed"),
                       m3::Error);
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
  CHECK_THROWS_AS(LoadModelConfig("/nonexistent"), m3::Error);
}

TEST_CASE("flat MSA keys win over the legacy sparse_attention_config") {
  auto j =
      nlohmann::json::parse(m3::test::ReadFile(m3::test::DataPath("m3-tiny/model/config.json")));
  j["text_config"]["sparse_attention_config"] = {{"sparse_index_dim", 99},
                                                 {"sparse_block_size", 64}};
  auto c = ParseModelConfig(j.dump(), "config.json");
  CHECK(c.text.index_head_dim == 16);
  CHECK(c.text.index_block_size == 8);
  j["text_config"].erase("index_head_dim");  // the legacy key fills what the flat ones lack
  CHECK(ParseModelConfig(j.dump(), "config.json").text.index_head_dim == 99);
}

TEST_CASE("the released checkpoint's vision keys load like transformers' own") {
  auto j =
      nlohmann::json::parse(m3::test::ReadFile(m3::test::DataPath("m3-tiny/model/config.json")));
  CHECK(ParseModelConfig(j.dump(), "config.json").vision.vision_segment_max_frames == 2);
  auto& v = j["vision_config"];
  for (const char* k : {"temporal_patch_size", "spatial_merge_size", "rope_parameters",
                        "vision_segment_max_frames"})
    v.erase(k);
  // The released config.json: compression block, flat rope_theta, 3D rope mode, max 4 frames.
  v["img_token_compression_config"] = {{"temporal_patch_size", 3}, {"spatial_merge_size", 4}};
  v["rope_theta"] = 5000.0;
  v["rope_mode"] = "3d";
  v["position_embedding_type"] = "rope";
  v["vision_segment_max_frames"] = 4;
  auto c = ParseModelConfig(j.dump(), "config.json");
  CHECK(c.vision.temporal_patch_size == 3);
  CHECK(c.vision.spatial_merge_size == 4);
  CHECK(c.vision.rope_theta == 5000.0);
  CHECK(c.vision.vision_segment_max_frames == 4);
  CHECK(c.vision.patch_dim() == 3 * 3 * 14 * 14);

  auto whole = j;  // absent: a video is one segment
  whole["vision_config"].erase("vision_segment_max_frames");
  CHECK(ParseModelConfig(whole.dump(), "config.json").vision.vision_segment_max_frames == 0);
  auto top = whole;  // some exports put it beside vision_config
  top["vision_segment_max_frames"] = 8;
  CHECK(ParseModelConfig(top.dump(), "config.json").vision.vision_segment_max_frames == 8);

  auto expect = [](const nlohmann::json& cfg, const char* fragment) {
    CHECK_THROWS_WITH_AS(ParseModelConfig(cfg.dump(), "config.json"), doctest::Contains(fragment),
                         m3::Error);
  };
  auto mode = j;
  mode["vision_config"]["rope_mode"] = "2d";
  expect(mode, "rope_mode '2d' is not supported");
  auto pe = j;
  pe["vision_config"]["position_embedding_type"] = "learned";
  expect(pe, "position_embedding_type");
  auto neg = j;
  neg["vision_config"]["vision_segment_max_frames"] = -1;
  expect(neg, "vision_segment_max_frames");
}

TEST_CASE("rope_theta and eps must be positive and finite") {
  auto j =
      nlohmann::json::parse(m3::test::ReadFile(m3::test::DataPath("m3-tiny/model/config.json")));
  auto expect = [](const nlohmann::json& cfg, const char* fragment) {
    CHECK_THROWS_WITH_AS(ParseModelConfig(cfg.dump(), "config.json"), doctest::Contains(fragment),
                         m3::Error);
  };
  for (double theta : {0.0, -10000.0}) {
    auto a = j;
    a["text_config"]["rope_parameters"]["rope_theta"] = theta;
    expect(a, "text_config: 'rope_theta' must be a positive finite number");
    auto b = j;
    b["vision_config"]["rope_parameters"]["rope_theta"] = theta;
    expect(b, "vision_config: 'rope_theta' must be a positive finite number");
  }
  auto e = j;
  e["text_config"]["rms_norm_eps"] = -1e-6;
  expect(e, "rms_norm_eps");
  auto p = j;
  p["vision_config"]["patch_size"] = 1000000000;
  expect(p, "implausibly large");
}

TEST_CASE("generation_config.json: eos ids and sampling defaults") {
  auto g = m3::ParseGenerationConfig(
      R"({"eos_token_id": [2, 7], "bos_token_id": 3, "do_sample": true, "temperature": 0.6,
          "top_p": 0.95, "top_k": 40})",
      "generation_config.json");
  CHECK(g.eos_token_ids == std::vector<int64_t>{2, 7});
  CHECK(g.bos_token_id == 3);
  CHECK(g.do_sample == true);
  CHECK(g.temperature == doctest::Approx(0.6));
  CHECK(g.top_p == doctest::Approx(0.95));
  CHECK(g.top_k == 40);
  CHECK_FALSE(g.min_p.has_value());
  CHECK(m3::ParseGenerationConfig(R"({"eos_token_id": 5})", "g").eos_token_ids ==
        std::vector<int64_t>{5});
  for (const char* bad :
       {R"({"eos_token_id": "x"})", R"({"eos_token_id": [-1]})", R"({"top_p": 1.5})",
        R"({"temperature": -1})", R"({"do_sample": 1})", "[1]", "{bad"}) {
    INFO(bad);
    CHECK_THROWS_AS(m3::ParseGenerationConfig(bad, "generation_config.json"), m3::Error);
  }
  // A model directory's generation_config.json decides where generation stops.
  auto chat = LoadModelConfig(m3::test::DataPath("chat-e2e/model"));
  CHECK(chat.generation.eos_token_ids == std::vector<int64_t>{2});
  CHECK(chat.eos_token_ids() == std::vector<int64_t>{2});
  auto tiny = LoadModelConfig(m3::test::DataPath("m3-tiny/model"));
  CHECK(tiny.eos_token_ids() == std::vector<int64_t>{505});
}
