// Eagle3DraftModel: weight loading and the host forward of the draft layer.
#include "engine/spec/eagle3_draft_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rope.h"
#include "shared/error.h"
#include "shared/safetensors.h"
#include "shared/tensor.h"

namespace m3::engine::spec {
namespace {

// Llama's RMSNorm: x * rsqrt(mean(x^2) + eps) * w (the weight itself, not 1 + w).
void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* w, double eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = xr[i] * inv * w[i];
  }
}

class Weights {
 public:
  explicit Weights(const std::string& dir)
      : path_((std::filesystem::path(dir) / "model.safetensors").string()),
        file_(SafetensorsFile::Open(path_)) {}

  // The tensor under its name, with or without "model.", the layer as "midlayer." or
  // "layers.0.".
  std::optional<std::string> Resolve(const std::string& name) const {
    std::vector<std::string> names = {name, "model." + name};
    if (name.rfind("layers.0.", 0) == 0) {
      const std::string mid = "midlayer." + name.substr(9);
      names.push_back(mid);
      names.push_back("model." + mid);
    }
    for (const std::string& n : names)
      if (file_.Has(n)) return n;
    return std::nullopt;
  }
  bool Has(const std::string& name) const { return Resolve(name).has_value(); }
  std::vector<float> Floats(const std::string& name, std::vector<int64_t> shape) const {
    const auto n = Resolve(name);
    Require(n.has_value(), ErrorCode::kNotFound, path_ + ": the EAGLE-3 draft has no " + name);
    const TensorView t = file_.Get(*n);
    Require(t.shape == shape, ErrorCode::kInvalidArgument,
            path_ + ": " + *n + " has shape " + ShapeString(t.shape) + ", expected " +
                ShapeString(shape));
    return ToFloat32(t, *n);
  }
  std::vector<int64_t> Ints(const std::string& name, int64_t count) const {
    const auto n = Resolve(name);
    Require(n.has_value(), ErrorCode::kNotFound, path_ + ": the EAGLE-3 draft has no " + name);
    const TensorView t = file_.Get(*n);
    Require(t.shape == std::vector<int64_t>{count}, ErrorCode::kInvalidArgument,
            path_ + ": " + *n + " must have shape [" + std::to_string(count) + "]");
    return ToInt64(t, *n);
  }

 private:
  static std::string ShapeString(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  }
  std::string path_;
  SafetensorsFile file_;
};

}  // namespace

void DraftKv::Truncate(int64_t end) {
  if (static_cast<int64_t>(filled.size()) <= end) return;
  std::fill(filled.begin() + end, filled.end(), uint8_t{0});
}

Eagle3DraftModel::Eagle3DraftModel(const std::string& dir, Eagle3Config config,
                                   std::vector<float> target_embedding)
    : c_(std::move(config)) {
  const Weights w(dir);
  const int64_t H = c_.hidden_size, D = c_.head_dim, Ht = c_.target_hidden_size;
  own_embedding_ = w.Has("embed_tokens.weight");
  if (own_embedding_) {
    embed_ = w.Floats("embed_tokens.weight", {c_.vocab_size, H});
  } else {
    Require(Ht == H && static_cast<int64_t>(target_embedding.size()) == c_.vocab_size * H,
            ErrorCode::kInvalidArgument,
            dir + ": the EAGLE-3 draft has no embed_tokens and the target's embeddings (width " +
                std::to_string(Ht) + ") do not fit its hidden size " + std::to_string(H));
    embed_ = std::move(target_embedding);
  }
  fc_ = w.Floats("fc.weight", {H, 3 * Ht});
  input_norm_ = w.Floats("layers.0.input_layernorm.weight", {H});
  hidden_norm_ = w.Floats("layers.0.hidden_norm.weight", {H});
  q_ = w.Floats("layers.0.self_attn.q_proj.weight", {c_.num_heads * D, 2 * H});
  k_ = w.Floats("layers.0.self_attn.k_proj.weight", {c_.num_kv_heads * D, 2 * H});
  v_ = w.Floats("layers.0.self_attn.v_proj.weight", {c_.num_kv_heads * D, 2 * H});
  o_ = w.Floats("layers.0.self_attn.o_proj.weight", {H, c_.num_heads * D});
  post_norm_ = w.Floats("layers.0.post_attention_layernorm.weight", {H});
  gate_ = w.Floats("layers.0.mlp.gate_proj.weight", {c_.intermediate_size, H});
  up_ = w.Floats("layers.0.mlp.up_proj.weight", {c_.intermediate_size, H});
  down_ = w.Floats("layers.0.mlp.down_proj.weight", {H, c_.intermediate_size});
  norm_ = w.Floats("norm.weight", {H});
  lm_head_ = w.Floats("lm_head.weight", {c_.draft_vocab_size, H});
  if (w.Has("d2t")) {
    d2t_ = w.Ints("d2t", c_.draft_vocab_size);
  } else {
    Require(c_.draft_vocab_size == c_.vocab_size, ErrorCode::kInvalidArgument,
            dir + ": a reduced draft vocabulary needs its d2t map");
    d2t_.assign(static_cast<size_t>(c_.draft_vocab_size), 0);
  }
  for (int64_t d = 0; d < c_.draft_vocab_size; ++d) {
    const int64_t t = d + d2t_[static_cast<size_t>(d)];
    Require(t >= 0 && t < c_.vocab_size, ErrorCode::kInvalidArgument,
            dir + ": d2t maps draft id " + std::to_string(d) + " to " + std::to_string(t) +
                ", outside the target vocabulary");
  }
  inv_freq_ = kernels::cpu::RopeInverseFrequencies(D, c_.rope_theta);
}

void Eagle3DraftModel::Fuse(const float* aux, int64_t rows, float* out) const {
  kernels::cpu::Linear(aux, rows, 3 * c_.target_hidden_size, fc_.data(), c_.hidden_size, nullptr,
                       out);
}

void Eagle3DraftModel::Forward(DraftKv& kv, std::span<const int32_t> ids,
                               std::span<const int64_t> positions, const float* hidden,
                               std::vector<float>& prenorm, std::vector<int32_t>& next) const {
  namespace cpu = kernels::cpu;
  const int64_t rows = static_cast<int64_t>(ids.size());
  const int64_t H = c_.hidden_size, D = c_.head_dim, Hq = c_.num_heads, Hkv = c_.num_kv_heads;
  const int64_t I = c_.intermediate_size, KvW = Hkv * D;
  std::vector<float> x(static_cast<size_t>(rows * 2 * H)), residual(rows * H), tmp(rows * H);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t id = ids[static_cast<size_t>(r)];
    Require(id >= 0 && id < c_.vocab_size, ErrorCode::kInternal,
            "EAGLE-3 draft: token id out of range");
    RmsNorm(embed_.data() + id * H, 1, H, input_norm_.data(), c_.rms_norm_eps,
            x.data() + r * 2 * H);
  }
  RmsNorm(hidden, rows, H, hidden_norm_.data(), c_.rms_norm_eps, tmp.data());
  for (int64_t r = 0; r < rows; ++r)
    std::copy(tmp.begin() + r * H, tmp.begin() + (r + 1) * H, x.begin() + r * 2 * H + H);
  if (c_.norm_before_residual) {
    residual = tmp;
  } else {
    residual.assign(hidden, hidden + rows * H);
  }
  std::vector<float> q(static_cast<size_t>(rows * Hq * D)), k(rows * KvW), v(rows * KvW);
  cpu::Linear(x.data(), rows, 2 * H, q_.data(), Hq * D, nullptr, q.data());
  cpu::Linear(x.data(), rows, 2 * H, k_.data(), KvW, nullptr, k.data());
  cpu::Linear(x.data(), rows, 2 * H, v_.data(), KvW, nullptr, v.data());
  std::vector<float> cos(static_cast<size_t>(D)), sin(static_cast<size_t>(D));
  int64_t end = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = positions[static_cast<size_t>(r)];
    cpu::RopeCosSin(pos, inv_freq_, cos.data(), sin.data());
    cpu::ApplyRotaryHalf(q.data() + r * Hq * D, Hq, D, D, cos.data(), sin.data());
    cpu::ApplyRotaryHalf(k.data() + r * KvW, Hkv, D, D, cos.data(), sin.data());
    end = std::max(end, pos + 1);
  }
  if (static_cast<int64_t>(kv.filled.size()) < end) {
    kv.filled.resize(static_cast<size_t>(end), 0);
    kv.k.resize(static_cast<size_t>(end * KvW));
    kv.v.resize(static_cast<size_t>(end * KvW));
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = positions[static_cast<size_t>(r)];
    std::copy(k.begin() + r * KvW, k.begin() + (r + 1) * KvW, kv.k.begin() + pos * KvW);
    std::copy(v.begin() + r * KvW, v.begin() + (r + 1) * KvW, kv.v.begin() + pos * KvW);
    kv.filled[static_cast<size_t>(pos)] = 1;
  }
  // Causal attention over the filled positions up to each row's own.
  std::vector<float> att(static_cast<size_t>(rows * Hq * D));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = positions[static_cast<size_t>(r)];
    ranges.clear();
    for (int64_t j = 0; j <= pos; ++j) {
      if (!kv.filled[static_cast<size_t>(j)]) continue;
      if (!ranges.empty() && ranges.back().second == j) {
        ++ranges.back().second;
      } else {
        ranges.emplace_back(j, j + 1);
      }
    }
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);
      cpu::AttendRanges(q.data() + (r * Hq + h) * D, kv.k.data() + g * D, kv.v.data() + g * D, KvW,
                        D, scale, ranges, att.data() + (r * Hq + h) * D);
    }
  }
  cpu::Linear(att.data(), rows, Hq * D, o_.data(), H, nullptr, tmp.data());
  for (size_t i = 0; i < residual.size(); ++i) residual[i] += tmp[i];
  std::vector<float> xn(static_cast<size_t>(rows * H));
  RmsNorm(residual.data(), rows, H, post_norm_.data(), c_.rms_norm_eps, xn.data());
  std::vector<float> g(static_cast<size_t>(rows * I)), u(static_cast<size_t>(rows * I));
  cpu::Linear(xn.data(), rows, H, gate_.data(), I, nullptr, g.data());
  cpu::Linear(xn.data(), rows, H, up_.data(), I, nullptr, u.data());
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  cpu::Linear(g.data(), rows, I, down_.data(), H, nullptr, tmp.data());
  for (size_t i = 0; i < residual.size(); ++i) residual[i] += tmp[i];
  prenorm = residual;
  RmsNorm(residual.data(), rows, H, norm_.data(), c_.rms_norm_eps, xn.data());
  std::vector<float> logits(static_cast<size_t>(rows * c_.draft_vocab_size));
  cpu::Linear(xn.data(), rows, H, lm_head_.data(), c_.draft_vocab_size, nullptr, logits.data());
  next.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits.data() + r * c_.draft_vocab_size;
    const int64_t d = std::max_element(l, l + c_.draft_vocab_size) - l;
    next[static_cast<size_t>(r)] = static_cast<int32_t>(d + d2t_[static_cast<size_t>(d)]);
  }
}

}  // namespace m3::engine::spec
