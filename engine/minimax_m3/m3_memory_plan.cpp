// The per-rank weight sum over the model's modules, and the fit check against cudaMemGetInfo.
#include "engine/minimax_m3/m3_memory_plan.h"

#include <cstdio>

#include "engine/backend/make_device.h"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::minimax_m3 {

namespace {

std::string GiB(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return b;
}

class Sum {
 public:
  explicit Sum(const LinearFormatOf& format_of) : format_of_(format_of) {}
  void Matrix(int64_t rows, int64_t cols) { bytes_ += rows * cols * 2; }
  void Vector(int64_t n) { bytes_ += n * 4; }
  // One Linear stacked from parts (fused projections, stacked experts: `rows` each, K wide);
  // parts in different formats are held dense, as the loader holds them.
  void Linear(const std::vector<std::pair<std::string, int64_t>>& parts, int64_t K) {
    std::optional<backend::WeightFormat> f;
    int64_t N = 0;
    bool mixed = false;
    for (const auto& [module, rows] : parts) {
      const std::optional<backend::WeightFormat> g = format_of_(module);
      if (!g) {
        known_ = false;
        return;
      }
      if (f && *f != *g) mixed = true;
      f = g;
      N += rows;
    }
    if (mixed) f = backend::WeightFormat::kDense;
    switch (*f) {
      case backend::WeightFormat::kDense:
        bytes_ += N * K * 2;
        break;
      case backend::WeightFormat::kMxfp8:
        bytes_ += N * K + N * (K / 32);
        break;
      case backend::WeightFormat::kNvfp4:
        bytes_ += N * (K / 2) + N * (K / 16) + N * 4;
        break;
    }
  }
  void Linear(const std::string& module, int64_t N, int64_t K) { Linear({{module, N}}, K); }
  std::optional<int64_t> result() const {
    return known_ ? std::optional<int64_t>(bytes_) : std::nullopt;
  }

 private:
  const LinearFormatOf& format_of_;
  int64_t bytes_ = 0;
  bool known_ = true;
};

}  // namespace

std::optional<int64_t> EstimateRankWeightBytes(const ModelConfig& config, const ShardPlan& plan,
                                               const LinearFormatOf& format_of) {
  const TextConfig& t = config.text;
  const VisionConfig& v = config.vision;
  Sum s(format_of);
  const int64_t H = t.hidden_size, D = t.head_dim, Di = t.index_head_dim;
  s.Matrix(t.vocab_size, H);  // embed_tokens
  s.Linear("language_model.lm_head", plan.vocab_gather ? plan.vocab.count : t.vocab_size, H);
  s.Vector(H);
  for (int64_t i = 0; i < t.num_hidden_layers; ++i) {
    const std::string p = "language_model.model.layers." + std::to_string(i) + ".";
    const std::string a = p + "self_attn.", b = p + "block_sparse_moe.";
    s.Vector(2 * H + 2 * D);
    std::vector<std::pair<std::string, int64_t>> qkv = {{a + "q_proj", plan.q_heads.count * D},
                                                        {a + "k_proj", plan.kv_heads.count * D},
                                                        {a + "v_proj", plan.kv_heads.count * D}};
    if (t.sparse_attention[static_cast<size_t>(i)]) {
      qkv.push_back({a + "index_q_proj", plan.kv_heads.count * Di});
      qkv.push_back({a + "index_k_proj", Di});
      s.Vector(2 * Di);
    }
    s.Linear(qkv, H);
    s.Linear(a + "o_proj", H, plan.q_heads.count * D);
    auto mlp = [&](const std::string& m, int64_t inter) {
      s.Linear({{m + "gate_proj", inter}, {m + "up_proj", inter}}, H);
      s.Linear(m + "down_proj", H, inter);
    };
    if (!t.moe_mlp[static_cast<size_t>(i)]) {
      mlp(p + "mlp.", plan.dense_inter.count);
      continue;
    }
    s.Matrix(t.num_local_experts, H);  // the router, never quantized
    s.Vector(t.num_local_experts);
    const int64_t I = plan.expert_inter.count;
    std::vector<std::pair<std::string, int64_t>> gate_up, down;
    for (int64_t e = plan.experts.first; e < plan.experts.first + plan.experts.count; ++e) {
      const std::string x = b + "experts." + std::to_string(e) + ".";
      gate_up.push_back({x + "w1", I});
      gate_up.push_back({x + "w3", I});
      down.push_back({x + "w2", H});
    }
    s.Linear(gate_up, H);
    s.Linear(down, I);
    mlp(b + "shared_experts.", plan.shared_inter.count);
  }
  const int64_t Dv = v.hidden_size, Iv = v.intermediate_size, P = config.projector_hidden_size;
  s.Matrix(Dv, v.patch_dim());
  s.Vector(2 * Dv);
  for (int64_t l = 0; l < v.num_hidden_layers; ++l) {
    s.Matrix(4 * Dv, Dv);
    s.Matrix(2 * Iv, Dv);
    s.Vector(4 * Dv + 3 * Dv + Dv + Iv + Dv);
  }
  s.Matrix(P, Dv);
  s.Matrix(H, P);
  s.Matrix(P, v.spatial_merge_size * v.spatial_merge_size * H);
  s.Matrix(H, P);
  s.Vector(2 * P + 2 * H);
  return s.result();
}

LinearFormatOf FormatsFromStore(const WeightStore& store) {
  return [&store](const std::string& module) -> std::optional<backend::WeightFormat> {
    std::optional<TensorView> w = store.Find(module + ".weight");
    const std::string released = ".mlp.";
    const size_t at = module.find(released);
    if (!w && at != std::string::npos)  // transformers 5's name of a dense MLP
      w = store.Find(module.substr(0, at) + ".block_sparse_moe." +
                     module.substr(at + released.size()) + ".weight");
    if (!w) return std::nullopt;
    if (w->dtype == DType::kU8) return backend::WeightFormat::kNvfp4;
    if (w->dtype == DType::kF8E4M3) return backend::WeightFormat::kMxfp8;
    return backend::WeightFormat::kDense;
  };
}

LinearFormatOf FormatsFromQuantConfig(const backend::QuantConfig& quant) {
  return [&quant](const std::string& module) -> std::optional<backend::WeightFormat> {
    return quant.FormatOf(module);
  };
}

void CheckWeightsFit(const std::vector<std::string>& devices,
                     const std::vector<int64_t>& rank_bytes) {
  std::string table;
  bool fits = true;
  for (size_t r = 0; r < devices.size() && r < rank_bytes.size(); ++r) {
    const backend::DeviceMemory m = backend::QueryDeviceMemory(devices[r]);
    if (m.total_bytes <= 0) continue;
    const bool ok = rank_bytes[r] <= m.free_bytes;
    fits = fits && ok;
    table += "\n  rank " + std::to_string(r) + " on " + devices[r] + ": weights need " +
             GiB(rank_bytes[r]) + ", " + GiB(m.free_bytes) + " free of " + GiB(m.total_bytes) +
             (ok ? "" : "  <- does not fit");
  }
  if (table.empty()) return;
  Require(fits, ErrorCode::kResourceExhausted,
          "the model's weights do not fit on the GPUs (estimated from the config and the "
          "checkpoint's formats, before uploading anything):" +
              table +
              "\n  use more GPUs (--tensor-parallel / --expert-parallel) or a smaller format");
  Log(LogLevel::kInfo, "engine: weight memory per GPU (estimate before loading):", table);
}

void CheckWeightsFit(const ModelConfig& config, const std::vector<ShardPlan>& plans,
                     const std::vector<std::string>& devices, const LinearFormatOf& format_of) {
  std::vector<int64_t> need;
  for (const ShardPlan& plan : plans) {
    const std::optional<int64_t> b = EstimateRankWeightBytes(config, plan, format_of);
    if (!b) return;
    need.push_back(*b);
  }
  CheckWeightsFit(devices, need);
}

}  // namespace m3::engine::minimax_m3
