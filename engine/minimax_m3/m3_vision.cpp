// Vision segments, the 3D rotary table, and the per-segment encoder graph of MiniMax-M3 VL.
#include "engine/minimax_m3/m3_vision.h"

#include <algorithm>
#include <cmath>

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

backend::DeviceTensor EncodeVisionSegment(backend::Device& dev, backend::M3Ops& ops,
                                          const M3ModelWeights& w, const ModelConfig& c,
                                          const float* patches, const GridThw& segment,
                                          NamedTensors* captured) {
  const VisionConfig& v = c.vision;
  const int64_t N = segment[0] * segment[1] * segment[2];
  const int64_t Dv = v.hidden_size, heads = v.num_attention_heads, hd = v.head_dim();
  const int64_t rot = 3 * VisionRotaryAxisDim(hd);
  const int64_t P = c.projector_hidden_size, H = c.text.hidden_size;
  const int64_t group = v.spatial_merge_size * v.spatial_merge_size, tokens = N / group;
  const float eps = static_cast<float>(v.layer_norm_eps);
  const DType f32 = dev.activation_dtype();

  backend::DeviceTensor px = dev.Alloc(f32, {N, v.patch_dim()});
  dev.Upload(patches, px);
  backend::DeviceTensor h = dev.Alloc(f32, {N, Dv});
  ops.Linear(px, w.patch_embed, nullptr, h);
  ops.LayerNorm(h, w.pre_ln_w, w.pre_ln_b, eps, h);

  std::vector<float> cos_host, sin_host;
  VisionRotaryTable(v, segment, cos_host, sin_host);
  // The rotary table stays float32 whatever the activation dtype.
  backend::DeviceTensor cos = dev.Alloc(DType::kF32, {N, rot}),
                        sin = dev.Alloc(DType::kF32, {N, rot});
  dev.Upload(cos_host.data(), cos);
  dev.Upload(sin_host.data(), sin);
  const std::vector<int64_t> segments = {0, N};

  backend::DeviceTensor x = dev.Alloc(f32, {N, Dv}), qkv = dev.Alloc(f32, {N, 3 * Dv});
  backend::DeviceTensor att = dev.Alloc(f32, {N, Dv}), tmp = dev.Alloc(f32, {N, Dv});
  backend::DeviceTensor mid = dev.Alloc(f32, {N, v.intermediate_size});
  for (const auto& L : w.vision_layers) {
    ops.LayerNorm(h, L.ln1_w, L.ln1_b, eps, x);
    ops.Linear(x, L.qkv_w, &L.qkv_b, qkv);
    ops.SegmentAttention(qkv, cos, sin, rot, segments, heads, hd, att);
    ops.Linear(att, L.out_w, &L.out_b, tmp);
    ops.Add(h, tmp);
    ops.LayerNorm(h, L.ln2_w, L.ln2_b, eps, x);
    ops.Linear(x, L.fc1_w, &L.fc1_b, mid);
    ops.Gelu(mid);
    ops.Linear(mid, L.fc2_w, &L.fc2_b, tmp);
    ops.Add(h, tmp);
  }

  // Projector per patch, then each merge block's patches (adjacent rows) concatenated: [N, H]
  // viewed as [N / group, group * H] is the merge MLP's input.
  backend::DeviceTensor a = dev.Alloc(f32, {N, P}), b = dev.Alloc(f32, {N, H});
  ops.Linear(h, w.proj1_w, &w.proj1_b, a);
  ops.Gelu(a);
  ops.Linear(a, w.proj2_w, &w.proj2_b, b);
  backend::DeviceTensor m = dev.Alloc(f32, {tokens, P}), out = dev.Alloc(f32, {tokens, H});
  ops.Linear(b.Reshape({tokens, group * H}), w.merge1_w, &w.merge1_b, m);
  ops.Gelu(m);
  ops.Linear(m, w.merge2_w, &w.merge2_b, out);

  if (captured) {
    for (const auto& [name, t] :
         {std::pair<const char*, const backend::DeviceTensor*>{"vision_tower_out", &h},
          {"projector_out", &out}}) {
      HostTensor host = HostTensor::Uninitialized(DType::kF32, t->shape);
      dev.Download(*t, host.data());
      captured->emplace_back(name, std::move(host));
    }
  }
  return out;
}

}  // namespace m3::engine::minimax_m3
