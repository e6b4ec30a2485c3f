// Vision tower and projector of MiniMax-M3 VL.
#include "engine/minimax_m3/m3_vision.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rope.h"

namespace m3::engine::minimax_m3 {

namespace k = m3::kernels::cpu;

std::vector<GridThw> VisionSegments(const std::vector<GridThw>& grids, int64_t max_frames) {
  std::vector<GridThw> out;
  for (const auto& [t, h, w] : grids) {
    if (max_frames <= 0 || t <= max_frames) {
      out.push_back({t, h, w});
      continue;
    }
    for (int64_t start = 0; start < t; start += max_frames)
      out.push_back({std::min(max_frames, t - start), h, w});
  }
  return out;
}

int64_t VisionRotaryAxisDim(int64_t head_dim) {
  return 2 * ((2 * (head_dim / 2) / 3) / 2);
}

void VisionRotaryTable(const VisionConfig& v, const GridThw& segment, std::vector<float>& cos,
                       std::vector<float>& sin) {
  const int64_t d = VisionRotaryAxisDim(v.head_dim());
  const std::vector<float> inv = k::RopeInverseFrequencies(d, v.rope_theta);
  const int64_t half = static_cast<int64_t>(inv.size());  // d / 2 angles per axis
  const int64_t rot = 6 * half;                           // 3d channels
  const int64_t m = v.spatial_merge_size;
  const auto [t, h, w] = segment;
  cos.assign(static_cast<size_t>(t * h * w * rot), 0.0f);
  sin.assign(cos.size(), 0.0f);
  int64_t row = 0;
  for (int64_t ti = 0; ti < t; ++ti)
    for (int64_t bh = 0; bh < h / m; ++bh)
      for (int64_t bw = 0; bw < w / m; ++bw)
        for (int64_t ih = 0; ih < m; ++ih)
          for (int64_t iw = 0; iw < m; ++iw, ++row) {
            const int64_t pos[3] = {ti, bh * m + ih, bw * m + iw};
            float* c = cos.data() + row * rot;
            float* s = sin.data() + row * rot;
            for (int64_t axis = 0; axis < 3; ++axis) {
              for (int64_t f = 0; f < half; ++f) {
                // float32 angle as the reference forms it, cos/sin of it in double.
                const float angle = static_cast<float>(pos[axis]) * inv[f];
                const int64_t i = axis * half + f;
                c[i] = c[i + rot / 2] = static_cast<float>(std::cos(double(angle)));
                s[i] = s[i + rot / 2] = static_cast<float>(std::sin(double(angle)));
              }
            }
          }
}

std::vector<float> EncodeVisionSegment(const M3Weights& w, const VisionConfig& v,
                                       const float* patches, const GridThw& segment) {
  const int64_t N = segment[0] * segment[1] * segment[2];
  const int64_t Dv = v.hidden_size, heads = v.num_attention_heads;
  const int64_t hd = v.head_dim();
  const int64_t rot = 3 * VisionRotaryAxisDim(hd);
  const float eps = static_cast<float>(v.layer_norm_eps);

  std::vector<float> h(N * Dv);
  k::Linear(patches, N, v.patch_dim(), w.patch_embed.data(), Dv, nullptr, h.data());
  k::LayerNorm(h.data(), N, Dv, w.pre_ln_w.data(), w.pre_ln_b.data(), eps, h.data());

  std::vector<float> cos, sin;
  VisionRotaryTable(v, segment, cos, sin);

  std::vector<float> x(N * Dv), q(N * Dv), kk(N * Dv), vv(N * Dv), att(N * Dv), tmp(N * Dv);
  std::vector<float> mid(N * v.intermediate_size);
  k::AttentionDims dims{heads, heads, hd, static_cast<float>(1.0 / std::sqrt(double(hd)))};
  for (const auto& L : w.vision_layers) {
    k::LayerNorm(h.data(), N, Dv, L.ln1_w.data(), L.ln1_b.data(), eps, x.data());
    k::Linear(x.data(), N, Dv, L.q_w.data(), Dv, L.q_b.data(), q.data());
    k::Linear(x.data(), N, Dv, L.k_w.data(), Dv, L.k_b.data(), kk.data());
    k::Linear(x.data(), N, Dv, L.v_w.data(), Dv, L.v_b.data(), vv.data());
    if (rot > 0) {
      for (int64_t i = 0; i < N; ++i) {
        k::ApplyRotaryHalf(q.data() + i * Dv, heads, hd, rot, cos.data() + i * rot,
                           sin.data() + i * rot);
        k::ApplyRotaryHalf(kk.data() + i * Dv, heads, hd, rot, cos.data() + i * rot,
                           sin.data() + i * rot);
      }
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

std::vector<float> RunVisionTower(const M3Weights& w, const ModelConfig& c, const VisionInput& in) {
  const VisionConfig& v = c.vision;
  std::vector<float> out;
  out.reserve(static_cast<size_t>(in.rows * v.hidden_size));
  int64_t row = 0;
  for (const GridThw& seg : VisionSegments(in.grids, v.vision_segment_max_frames)) {
    std::vector<float> h = EncodeVisionSegment(w, v, in.pixels.data() + row * in.patch_dim, seg);
    out.insert(out.end(), h.begin(), h.end());
    row += seg[0] * seg[1] * seg[2];
  }
  return out;
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
