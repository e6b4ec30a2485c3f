// Vision tower and projector of MiniMax-M3 VL.
#include "engine/minimax_m3/m3_vision.h"

#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rope.h"

namespace m3::engine::minimax_m3 {

namespace k = m3::kernels::cpu;

void VisionRotaryTable(const VisionConfig& v, const std::vector<std::array<int64_t, 3>>& grids,
                       std::vector<float>& cos, std::vector<float>& sin, int64_t& rot) {
  // inv_freq over head_dim / 2 channels (F frequencies). Position ids per patch are (t, h, w)
  // with h / w block-major over merge x merge blocks; the reference then uses columns 0 and 1
  // of those ids (t and h as of transformers 5.17.0) for the two frequency groups, giving
  // rows [f(col0), f(col1), f(col0), f(col1)].
  std::vector<float> inv = k::RopeInverseFrequencies(v.head_dim() / 2, v.rope_theta);
  const int64_t F = static_cast<int64_t>(inv.size());
  rot = 4 * F;
  const int64_t m = v.spatial_merge_size;
  cos.clear();
  sin.clear();
  for (const auto& g : grids) {
    const int64_t t = g[0], h = g[1], w = g[2];
    for (int64_t ti = 0; ti < t; ++ti)
      for (int64_t bh = 0; bh < h / m; ++bh)
        for (int64_t bw = 0; bw < w / m; ++bw)
          for (int64_t ih = 0; ih < m; ++ih)
            for (int64_t iw = 0; iw < m; ++iw) {
              const int64_t ids[3] = {ti, bh * m + ih, bw * m + iw};
              const int64_t col0 = ids[0], col1 = ids[1];
              for (int rep = 0; rep < 2; ++rep) {
                for (int64_t c : {col0, col1}) {
                  for (int64_t f = 0; f < F; ++f) {
                    float angle = static_cast<float>(c) * inv[f];
                    cos.push_back(static_cast<float>(std::cos(double(angle))));
                    sin.push_back(static_cast<float>(std::sin(double(angle))));
                  }
                }
              }
            }
  }
}

std::vector<float> RunVisionTower(const M3Weights& w, const ModelConfig& c, const VisionInput& in) {
  const VisionConfig& v = c.vision;
  const int64_t N = in.rows, Dv = v.hidden_size, heads = v.num_attention_heads;
  const int64_t hd = v.head_dim();
  const float eps = static_cast<float>(v.layer_norm_eps);

  std::vector<float> h(N * Dv);
  k::Linear(in.pixels.data(), N, v.patch_dim(), w.patch_embed.data(), Dv, nullptr, h.data());
  k::LayerNorm(h.data(), N, Dv, w.pre_ln_w.data(), w.pre_ln_b.data(), eps, h.data());

  std::vector<float> cos, sin;
  int64_t rot = 0;
  VisionRotaryTable(v, in.grids, cos, sin, rot);

  std::vector<float> x(N * Dv), q(N * Dv), kk(N * Dv), vv(N * Dv), att(N * Dv), tmp(N * Dv);
  std::vector<float> mid(N * v.intermediate_size);
  k::AttentionDims dims{heads, heads, hd, static_cast<float>(1.0 / std::sqrt(double(hd)))};
  for (const auto& L : w.vision_layers) {
    k::LayerNorm(h.data(), N, Dv, L.ln1_w.data(), L.ln1_b.data(), eps, x.data());
    k::Linear(x.data(), N, Dv, L.q_w.data(), Dv, L.q_b.data(), q.data());
    k::Linear(x.data(), N, Dv, L.k_w.data(), Dv, L.k_b.data(), kk.data());
    k::Linear(x.data(), N, Dv, L.v_w.data(), Dv, L.v_b.data(), vv.data());
    for (int64_t i = 0; i < N; ++i) {
      k::ApplyRotaryHalf(q.data() + i * Dv, heads, hd, rot, cos.data() + i * rot,
                         sin.data() + i * rot);
      k::ApplyRotaryHalf(kk.data() + i * Dv, heads, hd, rot, cos.data() + i * rot,
                         sin.data() + i * rot);
    }
    k::Attention(q.data(), N, kk.data(), vv.data(), N, dims, /*causal=*/false, nullptr, att.data());
    k::Linear(att.data(), N, Dv, L.out_w.data(), Dv, L.out_b.data(), tmp.data());
    for (int64_t i = 0; i < N * Dv; ++i) h[i] += tmp[i];

    k::LayerNorm(h.data(), N, Dv, L.ln2_w.data(), L.ln2_b.data(), eps, x.data());
    k::Linear(x.data(), N, Dv, L.fc1_w.data(), v.intermediate_size, L.fc1_b.data(), mid.data());
    k::GeluErf(mid.data(), static_cast<int64_t>(mid.size()));
    k::Linear(mid.data(), N, v.intermediate_size, L.fc2_w.data(), Dv, L.fc2_b.data(), tmp.data());
    for (int64_t i = 0; i < N * Dv; ++i) h[i] += tmp[i];
  }
  return h;
}

std::vector<float> ProjectAndMerge(const M3Weights& w, const ModelConfig& c,
                                   const std::vector<float>& features, int64_t rows) {
  const int64_t Dv = c.vision.hidden_size, P = c.projector_hidden_size, H = c.text.hidden_size;
  const int64_t group = c.vision.spatial_merge_size * c.vision.spatial_merge_size;
  std::vector<float> a(rows * P), b(rows * H);
  k::Linear(features.data(), rows, Dv, w.proj1_w.data(), P, w.proj1_b.data(), a.data());
  k::GeluErf(a.data(), static_cast<int64_t>(a.size()));
  k::Linear(a.data(), rows, P, w.proj2_w.data(), H, w.proj2_b.data(), b.data());
  // Each merge block's patches are adjacent, so [rows, H] viewed as [rows / group, group * H]
  // is the concatenation the merge MLP expects.
  const int64_t tokens = rows / group;
  std::vector<float> m(tokens * P), out(tokens * H);
  k::Linear(b.data(), tokens, group * H, w.merge1_w.data(), P, w.merge1_b.data(), m.data());
  k::GeluErf(m.data(), static_cast<int64_t>(m.size()));
  k::Linear(m.data(), tokens, P, w.merge2_w.data(), H, w.merge2_b.data(), out.data());
  return out;
}

}  // namespace m3::engine::minimax_m3
