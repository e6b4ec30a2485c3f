// m3-make-random-checkpoint: writes a random MiniMax-M3 VL checkpoint at chosen widths (default:
// the real model's text widths with 4 layers: 1 full attention + dense MLP, then MSA + MoE;
// hidden 6144, 64 query / 4 KV heads of 128, rotary 64, index 4 x 128, MSA block 128, top-16,
// 128 experts of 3072, top-4, shared expert 3072, dense MLP 12288, vocabulary 200064; a small
// vision tower) for benchmarks on the GPU machine, where a 49 GB checkpoint cannot be carried:
// config.json, generation_config.json and the weights. The engine takes token ids, so no
// tokenizer is written.
//
// Formats (--format; without it, BF16 in the transformers-5 layout, dense MLPs under
// block_sparse_moe.*): the released checkpoints' layouts (docs: M3_RELEASE_FORMATS.md), with
// the released names (dense MLPs under mlp.*):
//  - bf16: every tensor BF16;
//  - mxfp8 (MiniMax's): every language-model Linear but the router as `weight` F8_E4M3 [N, K] +
//    `weight_scale_inv` U8 [N, K / 32]; config.json quantization_config quant_method mxfp8;
//  - nvfp4 (ModelOpt NVFP4, the community checkpoint): routed experts and the dense / shared
//    down_proj as `weight` U8 [N, K / 2] + `weight_scale` F8_E4M3 [N, K / 16] + `weight_scale_2`
//    F32 [] + `input_scale` F32 [] (1.0), the rest BF16; hf_quant_config.json with its exclusion
//    list, and config.json's quantization_config;
//  - mixed (NVIDIA's MIXED_PRECISION): routed experts NVFP4, the other Linears MXFP8 (scales
//    `weight_scale_inv` U8), each module named in quantized_layers (both files).
// BF16 weights are uniform with the standard deviation of an initializer (embeddings 1, matrices
// 0.02), norms 1, biases 0; quantized Linears are normal(0, 0.02) quantized by the rules of
// kernels/cpu/microscaling.h (kernels/cpu/random_fill.h: the numbers --load-format dummy draws).
//
// Streaming: tensors are generated in pieces of at most 64 MiB by every core (pieces from their
// own counter-based streams: the bytes do not depend on the thread count) and written with
// pwrite, so host memory stays bounded whatever the checkpoint's size. --max-shard-size splits
// the weights into model-0000i-of-0000n.safetensors shards with model.safetensors.index.json (a
// quantized Linear's tensors stay in one shard). --config-only writes the config files alone;
// --full-size takes the released dimensions (60 layers, 0-2 dense; the 32-layer vision tower;
// the token ids of the M3 chat tokenizer, tests/data/m3-chat).
//   m3-make-random-checkpoint --out DIR [--format bf16|mxfp8|nvfp4|mixed] [--max-shard-size N[M|G]]
//       [--config-only] [--full-size] [--layers N] [--dense-layers N] [--experts N] [--vocab N]
//       [--threads N] [--max-position N] [--seed S] [--hidden N] [--heads N] [--expert-inter N]
//       [--shared-inter N] [--dense-inter N]
// (head_dim 128, 4 KV heads and the MSA index widths stay the real ones: narrower --hidden /
// --heads give small models on the same attention kernels, e.g. for tests.)
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/random_fill.h"
#include "tests/bench/random_m3_config.h"

namespace {

using nlohmann::json;

using Widths = m3::bench::RandomM3Shape;

enum class Format { kLegacy, kBf16, kMxfp8, kNvfp4, kMixed };
enum class Kind { kBf16, kMxfp8Codes, kMxfp8Scales, kNvfp4Codes, kNvfp4Scales, kF32 };
// How one Linear is stored.
enum class Storage { kBf16, kMxfp8, kNvfp4 };
// What a Linear is in the model, which decides its storage per format.
enum class Role { kAttention, kDenseGateUp, kDenseDown, kSharedGateUp, kSharedDown, kExpert };

constexpr float kLinearStd = 0.02f;

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;  // as stored
  Kind kind = Kind::kBf16;
  float stddev = 0;   // kBf16: 0 is the constant `fill`
  float fill = 0;     // kBf16 constants, kF32 scalars
  int64_t K = 0;      // codes: the Linear's dequantized K
  size_t scales = 0;  // codes: the index of its scales tensor
  int group = 0;      // tensors of one Linear share a group (and a shard)
  int shard = 0;
  uint64_t begin = 0, end = 0;  // byte offsets in its shard's data section
};

struct Layout {
  std::vector<Tensor> tensors;
  std::vector<std::pair<std::string, Storage>> quantized;  // module name, storage
};

Storage StorageFor(Format f, Role r) {
  switch (f) {
    case Format::kLegacy:
    case Format::kBf16:
      return Storage::kBf16;
    case Format::kMxfp8:
      return Storage::kMxfp8;
    case Format::kNvfp4:
      return r == Role::kExpert || r == Role::kDenseDown || r == Role::kSharedDown ? Storage::kNvfp4
                                                                                   : Storage::kBf16;
    case Format::kMixed:
      return r == Role::kExpert ? Storage::kNvfp4 : Storage::kMxfp8;
  }
  return Storage::kBf16;
}

uint64_t NumElements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

size_t ElementBytes(Kind k) {
  return k == Kind::kBf16 ? 2 : k == Kind::kF32 ? 4 : 1;
}

const char* DTypeName(Kind k) {
  switch (k) {
    case Kind::kBf16:
      return "BF16";
    case Kind::kMxfp8Codes:
    case Kind::kNvfp4Scales:
      return "F8_E4M3";
    case Kind::kMxfp8Scales:
    case Kind::kNvfp4Codes:
      return "U8";
    case Kind::kF32:
      return "F32";
  }
  return "?";
}

Layout Tensors(const Widths& w, Format format) {
  Layout L;
  std::vector<Tensor>& t = L.tensors;
  int group = 0;
  const float s = kLinearStd;
  auto add = [&](std::string name, std::vector<int64_t> shape, float stddev, float fill = 0) {
    Tensor x;
    x.name = std::move(name);
    x.shape = std::move(shape);
    x.stddev = stddev;
    x.fill = fill;
    x.group = group++;
    t.push_back(std::move(x));
  };
  // A Linear [N, K] named `module` in the storage its role has in this format.
  auto linear = [&](const std::string& module, int64_t N, int64_t K, Role role) {
    const Storage st = StorageFor(format, role);
    if (st == Storage::kBf16) {
      add(module + ".weight", {N, K}, s);
      return;
    }
    L.quantized.emplace_back(module, st);
    const int g = group++;
    auto part = [&](std::string name, std::vector<int64_t> shape, Kind kind, float fill = 0) {
      Tensor x;
      x.name = std::move(name);
      x.shape = std::move(shape);
      x.kind = kind;
      x.fill = fill;
      x.K = K;
      x.group = g;
      t.push_back(std::move(x));
    };
    const size_t codes = t.size();
    if (st == Storage::kMxfp8) {
      part(module + ".weight", {N, K}, Kind::kMxfp8Codes);
      part(module + ".weight_scale_inv", {N, K / 32}, Kind::kMxfp8Scales);
    } else {
      part(module + ".weight", {N, K / 2}, Kind::kNvfp4Codes);
      part(module + ".weight_scale", {N, K / 16}, Kind::kNvfp4Scales);
      part(module + ".weight_scale_2", {}, Kind::kF32, m3::kernels::cpu::DummyNvfp4GlobalScale(s));
      part(module + ".input_scale", {}, Kind::kF32, 1.0f);
    }
    t[codes].scales = codes + 1;
  };
  const int64_t H = w.hidden, D = w.head_dim;
  add("language_model.model.embed_tokens.weight", {w.vocab, H}, 1.0f);
  add("language_model.lm_head.weight", {w.vocab, H}, s);
  add("language_model.model.norm.weight", {H}, 0, 1);
  for (int64_t l = 0; l < w.layers; ++l) {
    const std::string p = "language_model.model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H}, 0, 1);
    add(p + "post_attention_layernorm.weight", {H}, 0, 1);
    const std::string a = p + "self_attn.";
    linear(a + "q_proj", w.heads * D, H, Role::kAttention);
    linear(a + "k_proj", w.kv_heads * D, H, Role::kAttention);
    linear(a + "v_proj", w.kv_heads * D, H, Role::kAttention);
    linear(a + "o_proj", H, w.heads * D, Role::kAttention);
    add(a + "q_norm.weight", {D}, 0, 1);
    add(a + "k_norm.weight", {D}, 0, 1);
    if (!w.full_attention(l)) {
      linear(a + "index_q_proj", w.kv_heads * w.index_head_dim, H, Role::kAttention);
      linear(a + "index_k_proj", w.index_head_dim, H, Role::kAttention);
      add(a + "index_q_norm.weight", {w.index_head_dim}, 0, 1);
      add(a + "index_k_norm.weight", {w.index_head_dim}, 0, 1);
    }
    const std::string m = p + "block_sparse_moe.";
    if (w.dense(l)) {
      // The released checkpoints name dense MLPs mlp.*; transformers 5 writes block_sparse_moe.*.
      const std::string d = format == Format::kLegacy ? m : p + "mlp.";
      linear(d + "gate_proj", w.dense_inter, H, Role::kDenseGateUp);
      linear(d + "up_proj", w.dense_inter, H, Role::kDenseGateUp);
      linear(d + "down_proj", H, w.dense_inter, Role::kDenseDown);
      continue;
    }
    add(m + "gate.weight", {w.experts, H}, s);
    add(m + "e_score_correction_bias", {w.experts}, 0);
    for (int64_t e = 0; e < w.experts; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      linear(x + "w1", w.expert_inter, H, Role::kExpert);
      linear(x + "w3", w.expert_inter, H, Role::kExpert);
      linear(x + "w2", H, w.expert_inter, Role::kExpert);
    }
    linear(m + "shared_experts.gate_proj", w.shared_inter, H, Role::kSharedGateUp);
    linear(m + "shared_experts.up_proj", w.shared_inter, H, Role::kSharedGateUp);
    linear(m + "shared_experts.down_proj", H, w.shared_inter, Role::kSharedDown);
  }
  const std::string V = "vision_tower.vision_model.";
  const int64_t Vh = w.vision_hidden, Vi = w.vision_mlp();
  add(V + "embeddings.patch_embedding.weight", {Vh, 3, 2, 14, 14}, s);
  add(V + "pre_layrnorm.weight", {Vh}, 0, 1);
  add(V + "pre_layrnorm.bias", {Vh}, 0);
  for (int64_t l = 0; l < w.vision_layers; ++l) {
    const std::string p = V + "encoder.layers." + std::to_string(l) + ".";
    for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      add(p + "self_attn." + n + ".weight", {Vh, Vh}, s);
      add(p + "self_attn." + n + ".bias", {Vh}, 0);
    }
    for (const char* n : {"layer_norm1", "layer_norm2"}) {
      add(p + n + ".weight", {Vh}, 0, 1);
      add(p + n + ".bias", {Vh}, 0);
    }
    add(p + "block_sparse_moe.fc1.weight", {Vi, Vh}, s);
    add(p + "block_sparse_moe.fc1.bias", {Vi}, 0);
    add(p + "block_sparse_moe.fc2.weight", {Vh, Vi}, s);
    add(p + "block_sparse_moe.fc2.bias", {Vh}, 0);
  }
  add("multi_modal_projector.linear_1.weight", {w.projector, Vh}, s);
  add("multi_modal_projector.linear_1.bias", {w.projector}, 0);
  add("multi_modal_projector.linear_2.weight", {H, w.projector}, s);
  add("multi_modal_projector.linear_2.bias", {H}, 0);
  add("patch_merge_mlp.linear_1.weight", {w.projector, 4 * H}, s);
  add("patch_merge_mlp.linear_1.bias", {w.projector}, 0);
  add("patch_merge_mlp.linear_2.weight", {H, w.projector}, s);
  add("patch_merge_mlp.linear_2.bias", {H}, 0);
  return L;
}

// The quantization description of a format: config.json's quantization_config and, for the
// ModelOpt formats, hf_quant_config.json (null when the format has none).
std::pair<json, json> QuantConfigs(Format f, const Layout& L) {
  const json producer = {{"name", "modelopt"}, {"version", "0.37.0"}};
  const json vision_and_heads = {"lm_head", "*block_sparse_moe.gate", "vision_tower*",
                                 "multi_modal_projector*", "patch_merge_mlp*"};
  switch (f) {
    case Format::kLegacy:
    case Format::kBf16:
      return {nullptr, nullptr};
    case Format::kMxfp8:
      return {{{"quant_method", "mxfp8"},
               {"activation_scheme", "dynamic"},
               {"weight_block_size", {1, 32}},
               {"ignored_layers", {"lm_head", "model.embed_tokens", "vision_tower"}}},
              nullptr};
    case Format::kNvfp4: {
      json exclude = vision_and_heads;
      for (const char* p : {"*self_attn*", "*mlp.gate_proj", "*mlp.up_proj",
                            "*shared_experts.gate_proj", "*shared_experts.up_proj"})
        exclude.push_back(p);
      const json hf = {{"producer", producer},
                       {"quantization",
                        {{"quant_algo", "NVFP4"},
                         {"kv_cache_quant_algo", nullptr},
                         {"group_size", 16},
                         {"exclude_modules", exclude}}}};
      const json qc = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"},
                       {"group_size", 16},           {"kv_cache_quant_algo", nullptr},
                       {"ignore", exclude},          {"producer", producer}};
      return {qc, hf};
    }
    case Format::kMixed: {
      json layers = json::object();
      for (const auto& [module, st] : L.quantized)
        layers[module] = st == Storage::kNvfp4 ? json{{"quant_algo", "NVFP4"}, {"group_size", 16}}
                                               : json{{"quant_algo", "MXFP8"}};
      const json hf = {{"producer", producer},
                       {"quantization",
                        {{"quant_algo", "MIXED_PRECISION"},
                         {"kv_cache_quant_algo", nullptr},
                         {"quantized_layers", layers},
                         {"exclude_modules", vision_and_heads}}}};
      const json qc = {{"quant_method", "modelopt"},     {"quant_algo", "MIXED_PRECISION"},
                       {"kv_cache_quant_algo", nullptr}, {"quantized_layers", layers},
                       {"ignore", vision_and_heads},     {"producer", producer}};
      return {qc, hf};
    }
  }
  return {nullptr, nullptr};
}

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint16_t Bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>(bits >> 16);
}

// Fills `n` bf16 elements of tensor t at `out` from `stream`.
void Fill(const Tensor& t, uint64_t n, uint16_t* out, uint64_t stream) {
  if (t.stddev == 0) {
    std::fill(out, out + n, Bf16(t.fill));
    return;
  }
  // Uniform on [-a, a] has standard deviation a / sqrt(3).
  const float a = t.stddev * std::sqrt(3.0f), scale = 2.0f * a / 65536.0f;
  uint64_t state = stream;
  for (uint64_t i = 0; i < n; i += 4) {
    const uint64_t r = SplitMix(state);
    for (uint64_t j = 0; j < 4 && i + j < n; ++j)
      out[i + j] = Bf16(static_cast<float>((r >> (16 * j)) & 0xffff) * scale - a);
  }
}

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "m3-make-random-checkpoint: %s\nusage: m3-make-random-checkpoint --out DIR "
               "[--format bf16|mxfp8|nvfp4|mixed] [--max-shard-size N[M|G]] [--config-only] "
               "[--full-size] [--layers N] [--dense-layers N] [--experts N] [--vocab N] "
               "[--threads N] [--max-position N] [--seed S] [--hidden N] [--heads N] "
               "[--expert-inter N] [--shared-inter N] [--dense-inter N]\n",
               why.c_str());
  std::exit(2);
}

void WriteAll(int fd, const void* data, size_t bytes, uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
    if (n <= 0) Usage("writing " + path + ": " + std::strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

// "5000000000", "500M", "5G" (decimal, as Hugging Face's max_shard_size), "512MiB", "4GiB".
uint64_t ParseBytes(const std::string& v) {
  size_t used = 0;
  double n = 0;
  try {
    n = std::stod(v, &used);
  } catch (const std::exception&) {
    Usage("--max-shard-size must be a size such as 5G, not '" + v + "'");
  }
  const std::string unit = v.substr(used);
  const std::map<std::string, double> units = {
      {"", 1},         {"B", 1},           {"K", 1e3},           {"KB", 1e3},
      {"M", 1e6},      {"MB", 1e6},        {"G", 1e9},           {"GB", 1e9},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  const auto it = units.find(unit);
  if (it == units.end() || !(n > 0)) Usage("--max-shard-size: bad size '" + v + "'");
  return static_cast<uint64_t>(n * it->second);
}

}  // namespace

int main(int argc, char** argv) {
  Widths w;
  std::string out;
  uint64_t seed = 1, max_shard = 0;
  Format format = Format::kLegacy;
  bool config_only = false;
  std::vector<std::pair<std::string, int64_t>> sizes;  // applied after --full-size
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config-only") {
      config_only = true;
      continue;
    }
    if (a == "--full-size") {
      w = m3::bench::FullSizeM3Shape();
      continue;
    }
    if (i + 1 >= argc) Usage("option " + a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--out") {
      out = v;
      continue;
    }
    if (a == "--format") {
      const std::map<std::string, Format> f = {{"bf16", Format::kBf16},
                                               {"mxfp8", Format::kMxfp8},
                                               {"nvfp4", Format::kNvfp4},
                                               {"mixed", Format::kMixed}};
      if (!f.count(v)) Usage("--format must be bf16, mxfp8, nvfp4 or mixed, not '" + v + "'");
      format = f.at(v);
      continue;
    }
    if (a == "--max-shard-size") {
      max_shard = ParseBytes(v);
      continue;
    }
    int64_t n = 0;
    try {
      size_t used = 0;
      n = std::stoll(v, &used);
      if (used != v.size() || n <= 0) throw std::invalid_argument(v);
    } catch (const std::exception&) {
      Usage(a + " must be a positive integer, not '" + v + "'");
    }
    sizes.emplace_back(a, n);
  }
  for (const auto& [a, n] : sizes) {
    if (a == "--layers")
      w.layers = n;
    else if (a == "--dense-layers")
      w.dense_layers = n;
    else if (a == "--experts")
      w.experts = n;
    else if (a == "--vocab")
      w.vocab = n;
    else if (a == "--threads")
      ::setenv("M3_NUM_THREADS", std::to_string(n).c_str(), 1);  // kernels::cpu::ParallelFor
    else if (a == "--max-position")
      w.max_position = n;
    else if (a == "--seed")
      seed = static_cast<uint64_t>(n);
    else if (a == "--hidden")
      w.hidden = n;
    else if (a == "--heads")
      w.heads = n;
    else if (a == "--expert-inter")
      w.expert_inter = n;
    else if (a == "--shared-inter")
      w.shared_inter = n;
    else if (a == "--dense-inter")
      w.dense_inter = n;
    else
      Usage("unknown option " + a);
  }
  if (out.empty()) Usage("--out is required");
  if (w.layers < 2) Usage("--layers must be at least 2 (a full attention layer, then MSA)");
  if (w.dense_layers < 1 || w.dense_layers >= w.layers)
    Usage("--dense-layers must be at least 1 and below --layers");
  if (w.experts < w.topk) Usage("--experts must be at least the top-k (4)");
  if (w.vocab < 16) Usage("--vocab must be at least 16");
  if (w.heads % w.kv_heads != 0) Usage("--heads must be a multiple of the 4 KV heads");
  if (format != Format::kLegacy && (w.hidden % 32 != 0 || w.expert_inter % 32 != 0 ||
                                    w.shared_inter % 32 != 0 || w.dense_inter % 32 != 0))
    Usage("quantized formats need --hidden and the MLP widths to be multiples of 32");
  const auto start = std::chrono::steady_clock::now();

  Layout layout = Tensors(w, format);
  std::vector<Tensor>& tensors = layout.tensors;
  // Shards: whole groups (a Linear's tensors) until the next would pass max_shard.
  std::vector<uint64_t> shard_bytes(1, 0);
  for (size_t i = 0; i < tensors.size();) {
    size_t j = i;
    uint64_t bytes = 0;
    for (; j < tensors.size() && tensors[j].group == tensors[i].group; ++j)
      bytes += NumElements(tensors[j].shape) * ElementBytes(tensors[j].kind);
    if (max_shard > 0 && shard_bytes.back() > 0 && shard_bytes.back() + bytes > max_shard)
      shard_bytes.push_back(0);
    for (; i < j; ++i) {
      Tensor& t = tensors[i];
      t.shard = static_cast<int>(shard_bytes.size()) - 1;
      t.begin = shard_bytes.back();
      t.end = t.begin + NumElements(t.shape) * ElementBytes(t.kind);
      shard_bytes.back() = t.end;
    }
  }
  const int shards = static_cast<int>(shard_bytes.size());
  auto shard_name = [&](int s) {
    if (max_shard == 0) return std::string("model.safetensors");
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", s + 1, shards);
    return std::string(buf);
  };

  std::filesystem::create_directories(out);
  json config = m3::bench::RandomM3Config(w);
  const auto [quant_config, hf_quant] = QuantConfigs(format, layout);
  if (!quant_config.is_null()) config["quantization_config"] = quant_config;
  std::ofstream(out + "/config.json") << config.dump(2) << "\n";
  if (!hf_quant.is_null()) std::ofstream(out + "/hf_quant_config.json") << hf_quant.dump(2) << "\n";
  json gen = {{"eos_token_id", w.eos_id()}};
  if (w.bos >= 0) gen["bos_token_id"] = w.bos_id();
  std::ofstream(out + "/generation_config.json") << gen.dump(2) << "\n";
  if (config_only) {
    std::printf("m3-make-random-checkpoint: config files for %zu tensors in %s\n", tensors.size(),
                out.c_str());
    return 0;
  }

  uint64_t total = 0, largest = 0;
  json weight_map = json::object();
  constexpr uint64_t kPiece = uint64_t{64} << 20;  // bytes generated and written at a time
  constexpr uint64_t kSub = uint64_t{1} << 20;     // bf16 elements per stream
  std::vector<uint8_t> piece(kPiece), piece_scales(kPiece / 16);
  for (int s = 0; s < shards; ++s) {
    json header = json::object();
    for (const Tensor& t : tensors) {
      if (t.shard != s) continue;
      header[t.name] = {
          {"dtype", DTypeName(t.kind)}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
      weight_map[t.name] = shard_name(s);
    }
    header["__metadata__"] = {{"format", "pt"}};
    std::string h = header.dump();
    h.append((8 - h.size() % 8) % 8, ' ');
    const uint64_t data_at = 8 + h.size(), file_bytes = data_at + shard_bytes[s];
    const std::string path = out + "/" + shard_name(s);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) Usage("cannot create " + path + ": " + std::strerror(errno));
    const uint64_t header_len = h.size();
    WriteAll(fd, &header_len, 8, 0, path);  // little-endian host (x86-64, aarch64)
    WriteAll(fd, h.data(), h.size(), 8, path);
    for (size_t ti = 0; ti < tensors.size(); ++ti) {
      const Tensor& t = tensors[ti];
      if (t.shard != s) continue;
      const uint64_t tseed = seed * 0x9e3779b97f4a7c15ULL ^ (static_cast<uint64_t>(ti) << 20);
      switch (t.kind) {
        case Kind::kBf16: {
          const uint64_t n = NumElements(t.shape), per_piece = kPiece / 2;
          for (uint64_t first = 0; first < n; first += per_piece) {
            const uint64_t len = std::min(per_piece, n - first);
            auto* dst = reinterpret_cast<uint16_t*>(piece.data());
            m3::kernels::cpu::ParallelFor(
                static_cast<int64_t>((len + kSub - 1) / kSub), 1, [&](int64_t lo, int64_t hi) {
                  for (int64_t c = lo; c < hi; ++c) {
                    const uint64_t b = static_cast<uint64_t>(c) * kSub;
                    Fill(t, std::min(kSub, len - b), dst + b,
                         tseed ^ ((first + b) / kSub) * 0xbf58476d1ce4e5b9ULL);
                  }
                });
            WriteAll(fd, dst, len * 2, data_at + t.begin + first * 2, path);
          }
          break;
        }
        case Kind::kMxfp8Codes:
        case Kind::kNvfp4Codes: {
          const bool mx = t.kind == Kind::kMxfp8Codes;
          const int64_t K = t.K, N = t.shape[0], code_row = mx ? K : K / 2;
          const int64_t scale_row = K / (mx ? 32 : 16);
          const int64_t rows_per = std::max<int64_t>(1, static_cast<int64_t>(kPiece) / code_row);
          if (static_cast<uint64_t>(rows_per * code_row) > piece.size())
            piece.resize(static_cast<size_t>(rows_per * code_row));
          if (static_cast<uint64_t>(rows_per * scale_row) > piece_scales.size())
            piece_scales.resize(static_cast<size_t>(rows_per * scale_row));
          const Tensor& sc = tensors[t.scales];
          for (int64_t r = 0; r < N; r += rows_per) {
            const int64_t rows = std::min(rows_per, N - r);
            if (mx)
              m3::kernels::cpu::RandomMxfp8Rows(tseed, kLinearStd, K, r, rows, piece.data(),
                                                piece_scales.data());
            else
              m3::kernels::cpu::RandomNvfp4Rows(tseed, kLinearStd,
                                                m3::kernels::cpu::DummyNvfp4GlobalScale(kLinearStd),
                                                K, r, rows, piece.data(), piece_scales.data());
            WriteAll(fd, piece.data(), static_cast<size_t>(rows * code_row),
                     data_at + t.begin + static_cast<uint64_t>(r * code_row), path);
            WriteAll(fd, piece_scales.data(), static_cast<size_t>(rows * scale_row),
                     data_at + sc.begin + static_cast<uint64_t>(r * scale_row), path);
          }
          break;
        }
        case Kind::kMxfp8Scales:
        case Kind::kNvfp4Scales:
          break;  // written with the codes
        case Kind::kF32:
          WriteAll(fd, &t.fill, 4, data_at + t.begin, path);
          break;
      }
    }
    if (::close(fd) != 0) Usage("closing " + path + ": " + std::strerror(errno));
    total += file_bytes;
    largest = std::max(largest, file_bytes);
  }
  if (max_shard > 0) {
    uint64_t data = 0;
    for (uint64_t b : shard_bytes) data += b;
    std::ofstream(out + "/model.safetensors.index.json")
        << json{{"metadata", {{"total_size", data}}}, {"weight_map", weight_map}}.dump(2) << "\n";
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "m3-make-random-checkpoint: %zu tensors, %.2f GB in %d file(s) under %s (largest %.2f GB), "
      "%.1f s (%.2f GB/s)\n",
      tensors.size(), static_cast<double>(total) / 1e9, shards, out.c_str(),
      static_cast<double>(largest) / 1e9, secs, static_cast<double>(total) / 1e9 / secs);
  std::printf("largest_shard_bytes=%llu total_bytes=%llu\n",
              static_cast<unsigned long long>(largest), static_cast<unsigned long long>(total));
  return 0;
}
