// RunDecoder and its attention / MLP steps.
#include "engine/minimax_m3/m3_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/block_sparse_attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_routing.h"
#include "kernels/cpu/msa_indexer.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"

namespace m3::engine::minimax_m3 {

namespace k = m3::kernels::cpu;

M3Sequence::M3Sequence(const TextConfig& t) {
  for (int64_t i = 0; i < t.num_hidden_layers; ++i)
    caches.emplace_back(t.num_key_value_heads * t.head_dim,
                        t.sparse_attention[i] ? t.index_head_dim : 0);
}

namespace {

// x [rows, hidden] -> out [rows, hidden] through gate_up -> swiglu-oai -> down.
void SwigluMlp(const SwigluMlpWeights& m, const TextConfig& t, const float* x, int64_t rows,
               float* out) {
  const int64_t H = t.hidden_size, I = m.inter;
  std::vector<float> gu(rows * 2 * I), act(rows * I);
  k::Linear(x, rows, H, m.gate_up.data(), 2 * I, nullptr, gu.data());
  k::SwigluOai(gu.data(), gu.data() + I, rows, I, 2 * I, static_cast<float>(t.swiglu_alpha),
               static_cast<float>(t.swiglu_limit), act.data());
  k::Linear(act.data(), rows, I, m.down.data(), H, nullptr, out);
}

// Routed experts (grouped by expert, in expert order as the reference accumulates them),
// scaled by routed_scaling_factor, plus the shared expert.
void MoeMlp(const TextLayerWeights& L, const TextConfig& t, const float* x, int64_t rows,
            float* out) {
  const int64_t H = t.hidden_size, E = t.num_local_experts, K = t.num_experts_per_tok;
  std::vector<float> logits(rows * E);
  k::Linear(x, rows, H, L.router.data(), E, nullptr, logits.data());
  std::vector<int64_t> ids(rows * K);
  std::vector<float> weights(rows * K);
  k::MoeRouteSigmoid(logits.data(), rows, E, L.router_bias.data(), K, ids.data(), weights.data());

  std::vector<float> routed(rows * H, 0.0f), xs, ys;
  for (int64_t e = 0; e < E; ++e) {
    std::vector<int64_t> tok;
    std::vector<float> wt;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < K; ++j)
        if (ids[r * K + j] == e) {
          tok.push_back(r);
          wt.push_back(weights[r * K + j]);
        }
    if (tok.empty()) continue;
    const int64_t n = static_cast<int64_t>(tok.size());
    xs.resize(n * H);
    ys.resize(n * H);
    for (int64_t i = 0; i < n; ++i) std::copy_n(x + tok[i] * H, H, xs.data() + i * H);
    SwigluMlp(L.experts[e], t, xs.data(), n, ys.data());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t d = 0; d < H; ++d) routed[tok[i] * H + d] += ys[i * H + d] * wt[i];
  }
  SwigluMlp(L.shared_expert, t, x, rows, out);
  const float scale = static_cast<float>(t.routed_scaling_factor);
  for (int64_t i = 0; i < rows * H; ++i) out[i] = routed[i] * scale + out[i];
}

HostTensor ToTensor(const std::vector<float>& v, Shape shape) {
  return HostTensor::FromFloat(std::move(shape), v);
}

}  // namespace

void RunDecoder(const M3Weights& w, const TextConfig& t, M3Sequence& seq, std::vector<float>& h,
                int64_t T, const DecoderCapture& capture) {
  const int64_t H = t.hidden_size, D = t.head_dim, Hq = t.num_attention_heads;
  const int64_t Hkv = t.num_key_value_heads, rot = t.rotary_dim;
  const float eps = static_cast<float>(t.rms_norm_eps);
  const int64_t p0 = seq.length_;

  std::vector<int64_t> pos(T);
  for (int64_t i = 0; i < T; ++i) pos[i] = p0 + i;
  // Text RoPE rows [freqs, freqs] of width rot, shared by attention and the indexer.
  std::vector<float> inv = k::RopeInverseFrequencies(rot, t.rope_theta);
  std::vector<float> cos(T * rot), sin(T * rot);
  for (int64_t i = 0; i < T; ++i)
    k::RopeCosSin(pos[i], inv, cos.data() + i * rot, sin.data() + i * rot);
  // The indexer rotates cos[..., :index_head_dim], i.e. a prefix of that same row.
  const int64_t index_rot = std::min(t.index_head_dim, rot);

  std::vector<float> x(T * H), q(T * Hq * D), kk(T * Hkv * D), vv(T * Hkv * D);
  std::vector<float> att(T * Hq * D), tmp(T * H);
  k::AttentionDims dims{Hq, Hkv, D, static_cast<float>(1.0 / std::sqrt(double(D)))};

  for (size_t li = 0; li < w.layers.size(); ++li) {
    const TextLayerWeights& L = w.layers[li];
    LayerKvCache& cache = seq.caches[li];
    if (capture.hidden_states && capture.out)
      capture.out->emplace_back("hidden_states." + std::to_string(li), ToTensor(h, {T, H}));

    k::RmsNormGemma(h.data(), T, H, L.input_norm.data(), eps, x.data());
    k::Linear(x.data(), T, H, L.q_proj.data(), Hq * D, nullptr, q.data());
    k::Linear(x.data(), T, H, L.k_proj.data(), Hkv * D, nullptr, kk.data());
    k::Linear(x.data(), T, H, L.v_proj.data(), Hkv * D, nullptr, vv.data());
    k::RmsNormGemma(q.data(), T * Hq, D, L.q_norm.data(), eps, q.data());
    k::RmsNormGemma(kk.data(), T * Hkv, D, L.k_norm.data(), eps, kk.data());
    for (int64_t i = 0; i < T; ++i) {
      k::ApplyRotaryHalf(q.data() + i * Hq * D, Hq, D, rot, cos.data() + i * rot,
                         sin.data() + i * rot);
      k::ApplyRotaryHalf(kk.data() + i * Hkv * D, Hkv, D, rot, cos.data() + i * rot,
                         sin.data() + i * rot);
    }

    if (L.sparse_attention) {
      const int64_t Hi = t.index_n_heads, Di = t.index_head_dim;
      std::vector<float> iq(T * Hi * Di), ik(T * Di);
      k::Linear(x.data(), T, H, L.index_q_proj.data(), Hi * Di, nullptr, iq.data());
      k::Linear(x.data(), T, H, L.index_k_proj.data(), Di, nullptr, ik.data());
      k::RmsNormGemma(iq.data(), T * Hi, Di, L.index_q_norm.data(), eps, iq.data());
      k::RmsNormGemma(ik.data(), T, Di, L.index_k_norm.data(), eps, ik.data());
      for (int64_t i = 0; i < T; ++i) {
        k::ApplyRotaryHalf(iq.data() + i * Hi * Di, Hi, Di, index_rot, cos.data() + i * rot,
                           sin.data() + i * rot);
        k::ApplyRotaryHalf(ik.data() + i * Di, 1, Di, index_rot, cos.data() + i * rot,
                           sin.data() + i * rot);
      }
      cache.Append(kk.data(), vv.data(), ik.data(), T);
      const int64_t tk = cache.length();
      k::IndexerParams ip{Hi, Di, t.index_block_size, t.index_topk_blocks, t.index_local_blocks};
      const int64_t slots = k::IndexerSlots(ip, tk);
      std::vector<int64_t> blocks(Hi * T * slots);
      k::IndexerSelectBlocks(iq.data(), T, cache.index_keys(), tk, pos.data(), ip, blocks.data());
      k::BlockSparseAttention(q.data(), T, cache.keys(), cache.values(), tk, dims, pos.data(),
                              blocks.data(), slots, t.index_block_size, att.data());
      if (capture.block_indices && capture.out)
        capture.out->emplace_back("block_indices.layer" + std::to_string(li),
                                  HostTensor::FromInt64({Hi, T, slots}, blocks));
    } else {
      cache.Append(kk.data(), vv.data(), nullptr, T);
      k::Attention(q.data(), T, cache.keys(), cache.values(), cache.length(), dims,
                   /*causal=*/true, pos.data(), att.data());
    }
    k::Linear(att.data(), T, Hq * D, L.o_proj.data(), H, nullptr, tmp.data());
    for (int64_t i = 0; i < T * H; ++i) h[i] += tmp[i];

    k::RmsNormGemma(h.data(), T, H, L.post_attention_norm.data(), eps, x.data());
    if (L.moe)
      MoeMlp(L, t, x.data(), T, tmp.data());
    else
      SwigluMlp(L.dense, t, x.data(), T, tmp.data());
    for (int64_t i = 0; i < T * H; ++i) h[i] += tmp[i];
  }
  k::RmsNormGemma(h.data(), T, H, w.final_norm.data(), eps, h.data());
  if (capture.hidden_states && capture.out)
    capture.out->emplace_back("hidden_states." + std::to_string(w.layers.size()),
                              ToTensor(h, {T, H}));
  seq.length_ += T;
}

}  // namespace m3::engine::minimax_m3
