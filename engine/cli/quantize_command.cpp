// `m3-engine quantize` (quantize_command.h): which MiniMax-M3 Linear gets which format in each
// layout, the row quantizers of kernels/cpu/microscaling.h, the quantization configs, shards.
#include "engine/cli/quantize_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/backend/quant_config.h"
#include "engine/backend/quantized_parts.h"
#include "engine/backend/source_pages.h"
#include "engine/cli/arg_parser.h"
#include "kernels/cpu/microscaling.h"
#include "shared/error.h"
#include "shared/json_file.h"
#include "shared/log.h"
#include "shared/safetensors.h"

namespace m3::engine::cli {
namespace {

namespace fs = std::filesystem;
using backend::WeightFormat;

enum class Layout { kMxfp8, kNvfp4, kMixed };

std::string Leaf(const std::string& module) {
  const size_t dot = module.rfind('.');
  return dot == std::string::npos ? module : module.substr(dot + 1);
}

// A Linear of the language model (the router, embeddings and norms are not).
bool IsLanguageLinear(const std::string& module) {
  static const std::set<std::string> kLeaves = {
      "q_proj",  "k_proj",    "v_proj", "o_proj", "index_q_proj", "index_k_proj", "gate_proj",
      "up_proj", "down_proj", "w1",     "w2",     "w3",           "lm_head",      "eh_proj"};
  return module.starts_with("language_model.") && kLeaves.count(Leaf(module)) != 0;
}

bool IsRoutedExpert(const std::string& module) {
  return module.find(".block_sparse_moe.experts.") != std::string::npos;
}

WeightFormat TargetFormat(Layout layout, const std::string& module) {
  if (!IsLanguageLinear(module)) return WeightFormat::kDense;
  const bool head = Leaf(module) == "lm_head";
  switch (layout) {
    case Layout::kMxfp8:
      return head ? WeightFormat::kDense : WeightFormat::kMxfp8;
    case Layout::kNvfp4:
      return IsRoutedExpert(module) || Leaf(module) == "down_proj" ? WeightFormat::kNvfp4
                                                                   : WeightFormat::kDense;
    case Layout::kMixed:
      return head                     ? WeightFormat::kDense
             : IsRoutedExpert(module) ? WeightFormat::kNvfp4
                                      : WeightFormat::kMxfp8;
  }
  return WeightFormat::kDense;
}

// The dense layers' MLP under the released `mlp.` or transformers 5's `block_sparse_moe.`
// (the shared expert, `block_sparse_moe.shared_experts.*`, is not touched).
std::string Rename(std::string name, const std::string& mlp_names) {
  if (mlp_names == "keep") return name;
  const std::string from = mlp_names == "released" ? ".block_sparse_moe." : ".mlp.";
  const std::string to = mlp_names == "released" ? ".mlp." : ".block_sparse_moe.";
  for (const char* proj : {"gate_proj.", "up_proj.", "down_proj."}) {
    const size_t at = name.find(from + proj);
    if (at != std::string::npos && name.starts_with("language_model.model.layers."))
      return name.replace(at, from.size(), to);
  }
  return name;
}

HostTensor F32Tensor(const Shape& shape, std::vector<float> values) {
  return HostTensor::FromFloat(shape, std::move(values));
}

// The tensors one source Linear becomes.
void Quantize(const std::string& module, WeightFormat f, const Shape& shape,
              const std::vector<float>& w, bool dequantize, NamedTensors& out) {
  const int64_t N = shape[0], K = shape[1], block = backend::WeightFormatBlock(f);
  const bool mx = f == WeightFormat::kMxfp8;
  HostTensor codes(mx ? DType::kF8E4M3 : DType::kU8, {N, mx ? K : K / 2});
  HostTensor scales(mx ? DType::kU8 : DType::kF8E4M3, {N, K / block});
  float amax = 0;
  for (float x : w) amax = std::max(amax, std::fabs(x));
  const float global = kernels::cpu::Nvfp4GlobalScale(amax);
  for (int64_t r = 0; r < N; ++r) {
    const float* row = w.data() + r * K;
    uint8_t* s = scales.data() + r * (K / block);
    if (mx)
      kernels::cpu::QuantizeMxfp8Row(row, K, codes.data() + r * K, s);
    else
      kernels::cpu::QuantizeNvfp4Row(row, K, global, codes.data() + r * K / 2, s);
  }
  if (dequantize) {
    backend::QuantizedPart p{codes.view(), scales.view(), global};
    out.emplace_back(module + ".weight",
                     F32Tensor(shape, backend::DequantizeParts(f, {&p, 1}, shape)));
    return;
  }
  out.emplace_back(module + ".weight", std::move(codes));
  out.emplace_back(module + (mx ? ".weight_scale_inv" : ".weight_scale"), std::move(scales));
  if (!mx) {
    out.emplace_back(module + ".weight_scale_2", F32Tensor({}, {global}));
    out.emplace_back(module + ".input_scale", F32Tensor({}, {1.0f}));  // W4A4 only; unused
  }
}

// config.json's quantization_config and hf_quant_config.json (ModelOpt layouts) for `layout`;
// `quantized`: module -> format of every quantized module (MIXED_PRECISION lists them).
std::pair<nlohmann::json, nlohmann::json> QuantConfigs(
    Layout layout, const std::map<std::string, WeightFormat>& quantized) {
  using nlohmann::json;
  const json vision = json::array({"vision_tower*", "multi_modal_projector*", "patch_merge_mlp*"});
  if (layout == Layout::kMxfp8)
    return {json{{"quant_method", "mxfp8"},
                 {"activation_scheme", "dynamic"},
                 {"weight_block_size", {1, 32}},
                 {"ignored_layers", {"lm_head", "model.embed_tokens", "vision_tower"}}},
            nullptr};
  json exclude = json::array({"lm_head"});
  for (const auto& v : vision) exclude.push_back(v);
  json q = json::object();
  if (layout == Layout::kNvfp4) {
    // Everything but the routed experts and the down projections stays as it was.
    for (const char* e : {"*self_attn*", "*gate_proj", "*up_proj", "*block_sparse_moe.gate"})
      exclude.push_back(e);
    q = {{"quant_algo", "NVFP4"}, {"group_size", 16}, {"kv_cache_quant_algo", nullptr}};
  } else {
    json layers = json::object();
    for (const auto& [module, f] : quantized)
      layers[module] = f == WeightFormat::kNvfp4 ? json{{"quant_algo", "NVFP4"}, {"group_size", 16}}
                                                 : json{{"quant_algo", "MXFP8"}};
    q = {{"quant_algo", "MIXED_PRECISION"},
         {"kv_cache_quant_algo", nullptr},
         {"quantized_layers", layers}};
  }
  json hf = {{"producer", {{"name", "modelopt"}, {"version", "m3-engine quantize"}}},
             {"quantization", q}};
  hf["quantization"]["exclude_modules"] = exclude;
  json config = q;
  config["quant_method"] = "modelopt";
  config["ignore"] = exclude;
  return {config, hf};
}

int64_t ParseSize(const std::string& s) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = s.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::map<std::string, double> units = {
      {"", 1},     {"B", 1},        {"KB", 1e3},        {"MB", 1e6},
      {"GB", 1e9}, {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}};
  Require(used > 0 && units.count(unit) && v > 0, ErrorCode::kInvalidArgument,
          "--max-shard-size must be a size such as 5GB or 200MB, not '" + s + "'");
  return static_cast<int64_t>(v * units.at(unit));
}

// Writes tensors into shards of at most `max_bytes` (a larger tensor alone), named
// model-0000i-of-0000n.safetensors with an index, or model.safetensors when one is enough.
class ShardWriter {
 public:
  ShardWriter(std::string dir, int64_t max_bytes) : dir_(std::move(dir)), max_(max_bytes) {}
  void Add(std::string name, HostTensor t) {
    const int64_t n = static_cast<int64_t>(t.nbytes());
    if (!current_.empty() && bytes_ + n > max_) Flush();
    bytes_ += n;
    total_ += n;
    current_.emplace_back(std::move(name), std::move(t));
  }
  int Finish() {
    if (!current_.empty() || files_.empty()) Flush();
    const int n = static_cast<int>(files_.size());
    if (n == 1) {
      fs::rename(Tmp(0), dir_ + "/model.safetensors");
      return n;
    }
    nlohmann::json map = nlohmann::json::object();
    char buf[64];
    for (int i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
      fs::rename(Tmp(i), dir_ + "/" + buf);
      for (const std::string& name : files_[static_cast<size_t>(i)]) map[name] = buf;
    }
    WriteSafetensorsIndex(map);
    return n;
  }

 private:
  std::string Tmp(int i) const { return dir_ + "/shard-" + std::to_string(i) + ".tmp"; }
  void Flush() {
    std::vector<std::string> names;
    for (const auto& [name, t] : current_) names.push_back(name);
    WriteSafetensors(Tmp(static_cast<int>(files_.size())), current_);
    files_.push_back(std::move(names));
    current_.clear();
    bytes_ = 0;
  }
  void WriteSafetensorsIndex(const nlohmann::json& map) {
    const nlohmann::json index = {{"metadata", {{"total_size", total_}}}, {"weight_map", map}};
    std::FILE* f = std::fopen((dir_ + "/model.safetensors.index.json").c_str(), "wb");
    Require(f != nullptr, ErrorCode::kInternal,
            "cannot write " + dir_ + "/model.safetensors.index.json");
    const std::string text = index.dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }

  std::string dir_;
  int64_t max_;
  int64_t bytes_ = 0, total_ = 0;
  NamedTensors current_;
  std::vector<std::vector<std::string>> files_;
};

void WriteText(const fs::path& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  Require(f != nullptr, ErrorCode::kInternal, "cannot write " + path.string());
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

}  // namespace

int RunQuantize(const std::vector<std::string>& args) {
  ArgParser p;
  for (const char* o : {"model", "output", "format", "max-shard-size", "mlp-names"}) p.AddOption(o);
  p.AddFlag("dequantize");
  p.Parse(args);
  const std::string src = p.Required("model"), dst = p.Required("output");
  Require(p.Has("format"), ErrorCode::kInvalidArgument,
          "--format is required: mxfp8, nvfp4 or mixed");
  const std::string format = p.Choice("format", {"mxfp8", "nvfp4", "mixed"}, "");
  const Layout layout = format == "mxfp8"   ? Layout::kMxfp8
                        : format == "nvfp4" ? Layout::kNvfp4
                                            : Layout::kMixed;
  const bool dequantize = p.Has("dequantize");
  const int64_t max_shard = ParseSize(p.Get("max-shard-size").value_or("5GB"));
  const std::string mlp_names = p.Choice("mlp-names", {"keep", "released", "transformers"}, "keep");
  Require(!backend::LoadQuantConfig(src).quantized(), ErrorCode::kInvalidArgument,
          src + " is already quantized: quantize a float checkpoint");
  Require(fs::weakly_canonical(src) != fs::weakly_canonical(dst), ErrorCode::kInvalidArgument,
          "--output must differ from --model");
  fs::create_directories(dst);
  Require(fs::is_empty(dst), ErrorCode::kInvalidArgument, "--output " + dst + " is not empty");

  const WeightStore store = WeightStore::OpenDirectory(src);
  ShardWriter writer(dst, max_shard);
  std::map<std::string, WeightFormat> quantized;  // output module -> format
  int64_t counts[3] = {0, 0, 0};
  for (const std::string& in_name : store.Names()) {
    const TensorView v = store.Get(in_name);
    const std::string name = Rename(in_name, mlp_names);
    NamedTensors out;
    const bool is_weight = name.ends_with(".weight");
    const std::string module = is_weight ? name.substr(0, name.size() - 7) : name;
    WeightFormat f =
        is_weight && v.shape.size() == 2 ? TargetFormat(layout, module) : WeightFormat::kDense;
    if (f != WeightFormat::kDense && v.shape[1] % backend::WeightFormatBlock(f) != 0) {
      Log(LogLevel::kWarn, "quantize: '", name, "' K = ", v.shape[1], " is not a multiple of ",
          backend::WeightFormatBlock(f), ": kept as it is");
      f = WeightFormat::kDense;
    }
    if (f != WeightFormat::kDense) {
      Quantize(module, f, v.shape, ToFloat32(v, in_name), dequantize, out);
      quantized[module] = f;
    } else if (dequantize) {
      out.emplace_back(name, F32Tensor(v.shape, ToFloat32(v, in_name)));
    } else {
      HostTensor t = HostTensor::Uninitialized(v.dtype, v.shape);
      std::copy(v.data, v.data + v.nbytes, t.data());
      out.emplace_back(name, std::move(t));
    }
    ++counts[static_cast<int>(f)];
    for (auto& [n, t] : out) writer.Add(n, std::move(t));
    backend::ReleasePages(v);  // what is converted is all this keeps of the source
  }
  const int shards = writer.Finish();

  // The configs, checked against what was written: the loader's reading of them must give
  // every Linear the format it has.
  auto [qc, hf] = QuantConfigs(layout, quantized);
  if (!dequantize) {
    const backend::QuantConfig parsed = backend::ParseQuantConfig(qc, "the written config");
    for (const std::string& in_name : store.Names()) {
      const std::string name = Rename(in_name, mlp_names);
      if (!name.ends_with(".weight")) continue;
      const std::string module = name.substr(0, name.size() - 7);
      if (!IsLanguageLinear(module)) continue;
      const auto it = quantized.find(module);
      const WeightFormat have = it == quantized.end() ? WeightFormat::kDense : it->second;
      Require(parsed.FormatOf(module) == have, ErrorCode::kInternal,
              "quantize: the written quantization config gives '" + module + "' " +
                  std::string(backend::WeightFormatName(parsed.FormatOf(module))) + ", not " +
                  std::string(backend::WeightFormatName(have)));
    }
  }
  for (const auto& entry : fs::directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const std::string file = entry.path().filename().string();
    if (file.ends_with(".safetensors") || file == "model.safetensors.index.json" ||
        file == "hf_quant_config.json")
      continue;
    if (file == "config.json") {
      nlohmann::json config = ParseJsonObject(ReadTextFile(entry.path()), entry.path().string());
      config.erase("quantization_config");
      if (!dequantize) config["quantization_config"] = qc;
      WriteText(fs::path(dst) / file, config.dump(2) + "\n");
    } else {
      fs::copy_file(entry.path(), fs::path(dst) / file);
    }
  }
  if (!dequantize && !hf.is_null())
    WriteText(fs::path(dst) / "hf_quant_config.json", hf.dump(2) + "\n");
  std::printf(
      "m3-engine quantize: %s%s: %lld dense, %lld MXFP8, %lld NVFP4 tensors in %d shard%s -> %s\n",
      format.c_str(), dequantize ? " (dequantized to float32)" : "",
      static_cast<long long>(counts[0]), static_cast<long long>(counts[1]),
      static_cast<long long>(counts[2]), shards, shards == 1 ? "" : "s", dst.c_str());
  return 0;
}

}  // namespace m3::engine::cli
