// QuantConfig (engine/backend/quant_config.h): MiniMax's mxfp8 config with its substring
// ignore list, ModelOpt NVFP4 / MXFP8 / MIXED_PRECISION from config.json or
// hf_quant_config.json with vLLM's exclusion rules (exact, substring, fnmatch, `X*` covering
// children, vision never quantized), and the errors for what the engine cannot load.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "engine/backend/quant_config.h"
#include "shared/error.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using engine::backend::FnMatch;
using engine::backend::LoadQuantConfig;
using engine::backend::ParseQuantConfig;
using engine::backend::QuantConfig;
using engine::backend::WeightFormat;
using nlohmann::json;

const std::string L = "language_model.model.layers.";

TEST_CASE("fnmatch as Python's fnmatchcase") {
  CHECK(FnMatch("model.layers.0.mlp.gate_proj", "model.layers.0.mlp*"));
  CHECK(FnMatch("model.layers.0.mlp", "model.layers.0.mlp*"));
  CHECK_FALSE(FnMatch("model.layers.10.mlp", "model.layers.0.mlp*"));
  CHECK(FnMatch("a.b.c", "*.c"));
  CHECK(FnMatch("abc", "a?c"));
  CHECK_FALSE(FnMatch("ac", "a?c"));
  CHECK(FnMatch("bx", "[ab]x"));
  CHECK_FALSE(FnMatch("cx", "[ab]x"));
  CHECK(FnMatch("cx", "[!ab]x"));
  CHECK(FnMatch("layers.7.w2", "layers.[0-9].w*"));
  CHECK_FALSE(FnMatch("lm_head", "*gate"));
  CHECK(FnMatch("", "*"));
  CHECK(FnMatch("x*y", "x[*]y"));
}

TEST_CASE("MiniMax mxfp8: every Linear but the ignored ones, matched as substrings") {
  const QuantConfig q =
      ParseQuantConfig(json{{"quant_method", "mxfp8"},
                            {"activation_scheme", "dynamic"},
                            {"weight_block_size", {1, 32}},
                            {"ignored_layers", {"lm_head", "model.embed_tokens", "vision_tower"}}},
                       "test");
  CHECK(q.method == QuantConfig::Method::kMxfp8);
  CHECK(q.FormatOf(L + "3.self_attn.q_proj") == WeightFormat::kMxfp8);
  CHECK(q.FormatOf(L + "3.self_attn.index_k_proj") == WeightFormat::kMxfp8);
  CHECK(q.FormatOf(L + "3.block_sparse_moe.experts.17.w2") == WeightFormat::kMxfp8);
  CHECK(q.FormatOf(L + "0.mlp.down_proj") == WeightFormat::kMxfp8);
  CHECK(q.FormatOf("language_model.lm_head") == WeightFormat::kDense);
  CHECK(q.FormatOf("language_model.model.embed_tokens") == WeightFormat::kDense);
  CHECK(q.FormatOf("vision_tower.vision_model.encoder.layers.0.self_attn.q_proj") ==
        WeightFormat::kDense);
  CHECK(q.FormatOf("multi_modal_projector.linear_1") == WeightFormat::kDense);
  const QuantConfig ignore =
      ParseQuantConfig(json{{"quant_method", "mxfp8"}, {"ignore", {"self_attn"}}}, "test");
  CHECK(ignore.FormatOf(L + "3.self_attn.q_proj") == WeightFormat::kDense);
  CHECK(ignore.FormatOf(L + "3.block_sparse_moe.experts.1.w1") == WeightFormat::kMxfp8);
  CHECK_THROWS_WITH_AS(
      ParseQuantConfig(json{{"quant_method", "mxfp8"}, {"weight_block_size", {128, 128}}}, "cfg"),
      doctest::Contains("cfg: mxfp8 needs weight_block_size [1, 32], not [128,128]"), Error);
}

TEST_CASE("ModelOpt NVFP4: vLLM's exclusion rules") {
  const json ignore = {"lm_head",
                       "model.layers.5.self_attn.o_proj",     // exact, without the prefix
                       "language_model.model.layers.0.mlp*",  // X* covers X's children
                       "*self_attn.q_proj",                   // a wildcard
                       "block_sparse_moe.gate"};              // a substring
  const QuantConfig q = ParseQuantConfig(json{{"quant_method", "modelopt"},
                                              {"quant_algo", "NVFP4"},
                                              {"group_size", 16},
                                              {"ignore", ignore}},
                                         "test");
  CHECK(q.method == QuantConfig::Method::kModelOpt);
  CHECK(q.FormatOf(L + "3.block_sparse_moe.experts.0.w1") == WeightFormat::kNvfp4);
  CHECK(q.FormatOf(L + "3.self_attn.k_proj") == WeightFormat::kNvfp4);
  CHECK(q.FormatOf(L + "3.self_attn.q_proj") == WeightFormat::kDense);
  CHECK(q.FormatOf(L + "5.self_attn.o_proj") == WeightFormat::kDense);
  CHECK(q.FormatOf(L + "6.self_attn.o_proj") == WeightFormat::kNvfp4);
  CHECK(q.FormatOf(L + "0.mlp.gate_proj") == WeightFormat::kDense);
  CHECK(q.FormatOf(L + "0.mlp") == WeightFormat::kDense);
  CHECK(q.FormatOf(L + "1.mlp.gate_proj") == WeightFormat::kNvfp4);
  CHECK(q.FormatOf(L + "3.block_sparse_moe.gate") == WeightFormat::kDense);
  // vLLM's substring rule also catches what merely contains the name.
  CHECK(q.FormatOf(L + "0.block_sparse_moe.gate_proj") == WeightFormat::kDense);
  CHECK(q.FormatOf("language_model.lm_head") == WeightFormat::kDense);
  // Vision modules never, whatever the list says.
  CHECK(q.FormatOf("vision_tower.vision_model.encoder.layers.0.block_sparse_moe.fc1") ==
        WeightFormat::kDense);
}

TEST_CASE("ModelOpt from hf_quant_config.json: nested settings, exclude_modules, MXFP8") {
  const QuantConfig q = ParseQuantConfig(
      json{{"producer", {{"name", "modelopt"}, {"version", "0.40"}}},
           {"quantization",
            {{"quant_algo", "MXFP8"}, {"group_size", 32}, {"exclude_modules", {"lm_head"}}}}},
      "hf_quant_config.json");
  CHECK(q.method == QuantConfig::Method::kModelOpt);
  CHECK(q.algo == "MXFP8");
  CHECK(q.FormatOf(L + "2.self_attn.o_proj") == WeightFormat::kMxfp8);
  CHECK(q.FormatOf("language_model.lm_head") == WeightFormat::kDense);
  // quant_algo case is normalized, as ModelOpt may write it lowercase.
  CHECK(ParseQuantConfig(json{{"quant_method", "modelopt"}, {"quant_algo", "nvfp4"}}, "t").algo ==
        "NVFP4");
}

TEST_CASE("ModelOpt MIXED_PRECISION: per-module algorithms, a parent entry covers children") {
  const json layers = {
      {L + "3.self_attn.q_proj", {{"quant_algo", "MXFP8"}}},
      {"model.layers.3.block_sparse_moe.experts", {{"quant_algo", "NVFP4"}, {"group_size", 16}}},
      {L + "3.block_sparse_moe.shared_experts.down_proj", {{"quant_algo", "MXFP8"}}}};
  const QuantConfig q = ParseQuantConfig(json{{"quant_method", "modelopt"},
                                              {"quant_algo", "MIXED_PRECISION"},
                                              {"quantized_layers", layers},
                                              {"ignore", {"lm_head"}}},
                                         "test");
  CHECK(q.FormatOf(L + "3.self_attn.q_proj") == WeightFormat::kMxfp8);
  CHECK(q.FormatOf(L + "3.self_attn.k_proj") == WeightFormat::kDense);  // not listed
  CHECK(q.FormatOf(L + "3.block_sparse_moe.experts.5.w1") == WeightFormat::kNvfp4);
  CHECK(q.FormatOf(L + "3.block_sparse_moe.shared_experts.down_proj") == WeightFormat::kMxfp8);
  CHECK(q.FormatOf(L + "4.block_sparse_moe.experts.5.w1") == WeightFormat::kDense);
  CHECK(q.FormatOf("language_model.lm_head") == WeightFormat::kDense);
}

TEST_CASE("an unknown method or algorithm is an error naming it") {
  auto fails = [](const json& j, const char* what) {
    CHECK_THROWS_WITH_AS(ParseQuantConfig(j, "config.json quantization_config"),
                         doctest::Contains(what), Error);
  };
  fails(json{{"quant_method", "gptq"}, {"bits", 4}},
        "config.json quantization_config: quant_method 'gptq' is not supported");
  fails(json{{"quant_method", "modelopt"}, {"quant_algo", "FP8"}}, "quant_algo 'FP8'");
  fails(json{{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 32}},
        "NVFP4 needs group_size 16, not 32");
  fails(json{{"quant_method", "modelopt"},
             {"quant_algo", "MIXED_PRECISION"},
             {"quantized_layers", {{"model.layers.1.mlp.up_proj", {{"quant_algo", "W4A8_AWQ"}}}}}},
        "quantized_layers['model.layers.1.mlp.up_proj']: quant_algo 'W4A8_AWQ'");
  fails(json{{"quant_method", "modelopt"}, {"quant_algo", "MIXED_PRECISION"}},
        "MIXED_PRECISION needs a 'quantized_layers' object");
  fails(json{{"bits", 4}}, "no 'quant_method'");
  fails(json{{"quant_method", "mxfp8"}, {"ignored_layers", "lm_head"}},
        "'ignored_layers' must be a list of strings");
}

TEST_CASE("a model directory: config.json first, then hf_quant_config.json, else none") {
  const std::string dir = TempDir();
  WriteFile(dir + "/config.json", json{{"model_type", "x"}}.dump());
  CHECK_FALSE(LoadQuantConfig(dir).quantized());
  WriteFile(dir + "/hf_quant_config.json",
            json{{"producer", {{"name", "modelopt"}}},
                 {"quantization", {{"quant_algo", "NVFP4"}, {"group_size", 16}}}}
                .dump());
  CHECK(LoadQuantConfig(dir).algo == "NVFP4");
  WriteFile(dir + "/config.json",
            json{{"quantization_config", {{"quant_method", "mxfp8"}}}}.dump());
  CHECK(LoadQuantConfig(dir).method == QuantConfig::Method::kMxfp8);
  WriteFile(dir + "/config.json", json{{"quantization_config", {{"quant_method", "awq"}}}}.dump());
  CHECK_THROWS_WITH_AS(LoadQuantConfig(dir), doctest::Contains("quant_method 'awq'"), Error);
}

}  // namespace
}  // namespace m3::test
