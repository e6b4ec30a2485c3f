// The full-size model directories (tests/data/minimax-m3-full: bf16, mxfp8, nvfp4, and mixed
// packed as mixed.tar.xz): each config.json parses with the engine's parser and gives the
// released dimensions; each format's quantization description is the one its checkpoints
// carry; and m3-make-random-checkpoint --full-size --config-only writes these very files.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "engine/backend/quant_config.h"
#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_memory_plan.h"
#include "engine/minimax_m3/m3_model_weights.h"
#include "engine/minimax_m3/m3_shard_plan.h"
#include "engine/model_registry.h"
#include "shared/error.h"
#include "shared/safetensors.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using nlohmann::json;

const char* const kFormats[] = {"bf16", "mxfp8", "nvfp4", "mixed"};

std::string FullSizeDir(const std::string& format) {
  return DataPath("minimax-m3-full/" + format);
}

json Read(const std::string& path) {
  return json::parse(ReadFile(path));
}

TEST_CASE("full-size configs: the released dimensions in every format") {
  for (const char* f : kFormats) {
    CAPTURE(f);
    const auto c = engine::minimax_m3::LoadModelConfig(FullSizeDir(f));
    engine::minimax_m3::CheckM3Config(c);
    const auto& t = c.text;
    CHECK(t.vocab_size == 200064);
    CHECK(t.hidden_size == 6144);
    CHECK(t.num_hidden_layers == 60);
    CHECK(t.num_attention_heads == 64);
    CHECK(t.num_key_value_heads == 4);
    CHECK(t.head_dim == 128);
    CHECK(t.rotary_dim == 64);
    CHECK(t.rope_theta == 5e6);
    CHECK(t.max_position_embeddings == 524288);
    CHECK(t.dense_intermediate_size == 12288);
    CHECK(t.num_local_experts == 128);
    CHECK(t.intermediate_size == 3072);
    CHECK(t.num_experts_per_tok == 4);
    CHECK(t.shared_intermediate_size == 3072);
    CHECK(t.routed_scaling_factor == 2.0);
    CHECK(t.index_n_heads == 4);
    CHECK(t.index_head_dim == 128);
    CHECK(t.index_block_size == 128);
    CHECK(t.index_topk_blocks == 16);
    CHECK(t.index_local_blocks == 1);
    for (int64_t i = 0; i < 60; ++i) {
      CHECK(t.moe_mlp[i] == (i >= 3));
      CHECK(t.sparse_attention[i] == (i >= 3));
    }
    CHECK(c.vision.num_hidden_layers == 32);
    CHECK(c.vision.hidden_size == 1280);
    CHECK(c.vision.head_dim() == 80);
    // The M3 chat tokenizer's ids (the directories carry its files).
    CHECK(c.image_token_id == 6);
    CHECK(c.video_token_id == 7);
    CHECK(c.eos_token_ids() == std::vector<int64_t>{2});
    const json cfg = Read(FullSizeDir(f) + "/config.json");
    CHECK(cfg["text_config"]["num_mtp_modules"] == 1);
  }
}

TEST_CASE("full-size configs: each format's quantization description") {
  CHECK_FALSE(Read(FullSizeDir("bf16") + "/config.json").contains("quantization_config"));
  const json mx = Read(FullSizeDir("mxfp8") + "/config.json")["quantization_config"];
  CHECK(mx["quant_method"] == "mxfp8");
  CHECK(mx["weight_block_size"] == json{1, 32});
  CHECK(mx["ignored_layers"] == json{"lm_head", "model.embed_tokens", "vision_tower"});
  CHECK_FALSE(std::filesystem::exists(FullSizeDir("mxfp8") + "/hf_quant_config.json"));

  const json nv = Read(FullSizeDir("nvfp4") + "/hf_quant_config.json");
  CHECK(nv["producer"]["name"] == "modelopt");
  CHECK(nv["quantization"]["quant_algo"] == "NVFP4");
  CHECK(nv["quantization"]["group_size"] == 16);
  const json nv_qc = Read(FullSizeDir("nvfp4") + "/config.json")["quantization_config"];
  CHECK(nv_qc["quant_method"] == "modelopt");
  CHECK(nv_qc["ignore"] == nv["quantization"]["exclude_modules"]);

  const json mixed = Read(FullSizeDir("mixed") + "/hf_quant_config.json")["quantization"];
  CHECK(mixed["quant_algo"] == "MIXED_PRECISION");
  const json& layers = mixed["quantized_layers"];
  int64_t nvfp4 = 0, mxfp8 = 0;
  for (const auto& [module, q] : layers.items()) {
    const bool expert = module.find(".experts.") != std::string::npos;
    CHECK_MESSAGE(q["quant_algo"] == (expert ? "NVFP4" : "MXFP8"), module);
    (expert ? nvfp4 : mxfp8) += 1;
  }
  CHECK(nvfp4 == 57 * 128 * 3);
  // Attention q/k/v/o on 60 layers, the index q/k on 57, dense gate/up/down on 3, shared on 57.
  CHECK(mxfp8 == 60 * 4 + 57 * 2 + 3 * 3 + 57 * 3);
  CHECK(layers.contains("language_model.model.layers.0.mlp.down_proj"));
  CHECK(layers.contains("language_model.model.layers.59.block_sparse_moe.experts.127.w2"));
  CHECK(Read(FullSizeDir("mixed") + "/config.json")["quantization_config"]["quantized_layers"] ==
        layers);
}

TEST_CASE("full-size configs: m3-make-random-checkpoint writes these files") {
  for (const char* f : kFormats) {
    CAPTURE(f);
    const std::string out = TempDir() + "/" + f;
    const std::string cmd = BinPath("m3-make-random-checkpoint") +
                            " --full-size --config-only --format " + f + " --out " + out +
                            " > /dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    for (const char* file : {"config.json", "generation_config.json", "hf_quant_config.json"}) {
      CAPTURE(file);
      const std::string have = FullSizeDir(f) + "/" + file, made = out + "/" + file;
      REQUIRE(std::filesystem::exists(have) == std::filesystem::exists(made));
      if (std::filesystem::exists(made)) CHECK(Read(have) == Read(made));
    }
    std::filesystem::remove_all(out);
  }
}

namespace mm = engine::minimax_m3;
using engine::backend::WeightFormat;

// The storage of each Linear in a format, by its role (as m3-make-random-checkpoint writes).
mm::LinearFormatOf RoleFormats(const std::string& format) {
  return [format](const std::string& m) -> std::optional<WeightFormat> {
    const bool expert = m.find(".experts.") != std::string::npos;
    const bool down = m.find("down_proj") != std::string::npos;
    const bool head = m.find("lm_head") != std::string::npos;
    if (format == "bf16" || head) return WeightFormat::kDense;
    if (format == "mxfp8") return WeightFormat::kMxfp8;
    if (format == "nvfp4") return expert || down ? WeightFormat::kNvfp4 : WeightFormat::kDense;
    return expert ? WeightFormat::kNvfp4 : WeightFormat::kMxfp8;  // mixed
  };
}

TEST_CASE("weight memory estimate: the full size per GPU in each format") {
  constexpr double kGiB = 1 << 30;
  constexpr double kH200 = 139.0;  // GiB a H200 has for this process (of 141 GB)
  for (const char* f : kFormats) {
    const auto c = mm::LoadModelConfig(FullSizeDir(f));
    const double whole =
        *mm::EstimateRankWeightBytes(c, mm::SingleRankPlan(c.text), RoleFormats(f)) / kGiB;
    const double tp2 =
        *mm::EstimateRankWeightBytes(c, mm::MakeShardPlan(c.text, 2, 1, 0), RoleFormats(f)) / kGiB;
    const double ep2 =
        *mm::EstimateRankWeightBytes(c, mm::MakeShardPlan(c.text, 1, 2, 1), RoleFormats(f)) / kGiB;
    MESSAGE(std::string(f) << ": " << whole << " GiB on one GPU, " << tp2
                           << " GiB per GPU at TP 2, " << ep2 << " at EP 2");
    // TP 2 splits everything but the embeddings, routers and the vision tower.
    CHECK(tp2 < whole / 2 + 6);
    CHECK(tp2 > whole / 2);
    if (std::string(f) == "bf16") {
      CHECK(whole > 780);  // 795 GiB: the released checkpoint's ~854 GB
      CHECK(whole < 800);
      CHECK(tp2 > kH200);
    }
    if (std::string(f) == "nvfp4" || std::string(f) == "mixed") CHECK(tp2 < kH200);
  }
}

TEST_CASE("full-size configs: the engine's quantization config reads each module's format") {
  for (const char* f : kFormats) {
    CAPTURE(f);
    const auto c = mm::LoadModelConfig(FullSizeDir(f));
    const engine::backend::QuantConfig q = engine::backend::LoadQuantConfig(FullSizeDir(f));
    CHECK(q.quantized() == (std::string(f) != "bf16"));
    // Every Linear of a rank, through the estimate: the loader's reading gives the same bytes
    // as the formats m3-make-random-checkpoint means.
    for (const auto& plan : {mm::SingleRankPlan(c.text), mm::MakeShardPlan(c.text, 2, 1, 1)})
      CHECK(*mm::EstimateRankWeightBytes(c, plan, mm::FormatsFromQuantConfig(q)) ==
            *mm::EstimateRankWeightBytes(c, plan, RoleFormats(f)));
    const std::string l = "language_model.model.layers.";
    CHECK(q.FormatOf(l + "0.mlp.down_proj") == *RoleFormats(f)(l + "0.mlp.down_proj"));
    CHECK(q.FormatOf(l + "7.block_sparse_moe.experts.3.w1") ==
          *RoleFormats(f)(l + "7.block_sparse_moe.experts.3.w1"));
    CHECK(q.FormatOf(l + "7.self_attn.index_k_proj") ==
          *RoleFormats(f)(l + "7.self_attn.index_k_proj"));
  }
}

TEST_CASE("m3-make-random-checkpoint's sharded checkpoints load in each format") {
  for (const char* f : kFormats) {
    CAPTURE(f);
    const std::string dir = TempDir() + "/load-" + f;
    const std::string cmd = BinPath("m3-make-random-checkpoint") + " --format " + f + " --out " +
                            dir +
                            " --layers 3 --experts 8 --vocab 1000 --hidden 256 --heads 8 "
                            "--expert-inter 128 --shared-inter 128 --dense-inter 256 "
                            "--max-shard-size 1M > /dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    CHECK(std::filesystem::exists(dir + "/model.safetensors.index.json"));
    const json index = Read(dir + "/model.safetensors.index.json");
    std::set<std::string> shards;
    for (const auto& [name, file] : index["weight_map"].items()) {
      shards.insert(file.get<std::string>());
      CHECK(std::filesystem::exists(dir + "/" + file.get<std::string>()));
    }
    CHECK(shards.size() > 2);
    engine::RunnerOptions ro;
    auto runner = engine::LoadModelRunner(dir, ro);
    CHECK(runner->info().weight_bytes > 0);
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("weight memory estimate: equal to what a quantized checkpoint's tensors take") {
  for (const char* f : {"bf16", "mxfp8", "nvfp4", "mixed"}) {
    CAPTURE(f);
    const std::string dir = TempDir() + "/ck-" + f;
    const std::string cmd = BinPath("m3-make-random-checkpoint") + " --format " + f + " --out " +
                            dir +
                            " --layers 3 --dense-layers 1 --experts 8 --vocab 1000 --hidden 256 "
                            "--heads 8 --expert-inter 128 --shared-inter 128 --dense-inter 256 "
                            "--max-shard-size 1M > /dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const WeightStore store = WeightStore::OpenDirectory(dir);
    const auto c = mm::LoadModelConfig(dir);
    // On a GPU: matrices as stored, 1-D weights in f32, NVFP4 global scales as one float per
    // row; the input scales are not kept.
    int64_t want = 0;
    for (const std::string& name : store.Names()) {
      const TensorView t = store.Get(name);
      if (name.ends_with(".input_scale") || name.ends_with(".weight_scale_2")) continue;
      want += t.shape.size() == 1 ? t.numel() * 4 : static_cast<int64_t>(t.nbytes);
      if (t.dtype == DType::kU8 && name.ends_with(".weight")) want += t.shape[0] * 4;  // NVFP4
    }
    const std::optional<int64_t> got =
        mm::EstimateRankWeightBytes(c, mm::SingleRankPlan(c.text), mm::FormatsFromStore(store));
    REQUIRE(got);
    CHECK(*got == want);
    // A Linear the checkpoint lacks: no estimate.
    CHECK_FALSE(mm::EstimateRankWeightBytes(c, mm::SingleRankPlan(c.text),
                                            [](const std::string&) { return std::nullopt; }));
    std::filesystem::remove_all(dir);
  }
  // Devices without a memory report are not checked; a GPU's is (see cuda_test).
  mm::CheckWeightsFit({"cpu"}, {int64_t{1} << 60});
}

}  // namespace
}  // namespace m3::test
