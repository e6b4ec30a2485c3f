// The config.json of a random MiniMax-M3 VL checkpoint for benchmarks and GPU tests, from a few
// widths: m3-bench-engine's CPU-sized model and m3-make-random-checkpoint's real-width one share
// it (the fields the engine reads, in the upstream layout; docs/M3_REFERENCE.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace m3::bench {

struct RandomM3Shape {
  int64_t hidden = 6144, layers = 4, heads = 64, kv_heads = 4, head_dim = 128;
  int64_t experts = 128, topk = 4, expert_inter = 3072, shared_inter = 3072;
  int64_t dense_inter = 12288, vocab = 200064;
  int64_t index_heads = 4, index_head_dim = 128, index_block = 128, index_topk = 16;
  int64_t max_position = 131072;
  int64_t vision_hidden = 128, vision_layers = 1, vision_heads = 4;
  int64_t vision_inter = 0;  // 0: 2 * vision_hidden
  int64_t projector = 256;
  // Layers [0, dense_layers) have a dense MLP and full attention, the others MoE and MSA (or,
  // with full_attention_every > 0, full attention where i % full_attention_every == 0).
  int64_t dense_layers = 1;
  int64_t full_attention_every = 0;
  int64_t mtp_modules = 0;  // num_mtp_modules (written to the config only)
  double rope_theta = 10000000.0;
  // Token ids; -1: the last ids of the vocabulary (vocab - 8, - 7, - 4, - 3).
  int64_t image_token = -1, video_token = -1, bos = -1, eos = -1;

  bool dense(int64_t layer) const { return layer < dense_layers; }
  bool full_attention(int64_t layer) const {
    return full_attention_every > 0 ? layer % full_attention_every == 0 : layer < dense_layers;
  }
  int64_t vision_mlp() const { return vision_inter > 0 ? vision_inter : 2 * vision_hidden; }
  int64_t image_id() const { return image_token >= 0 ? image_token : vocab - 8; }
  int64_t video_id() const { return video_token >= 0 ? video_token : vocab - 7; }
  int64_t bos_id() const { return bos >= 0 ? bos : vocab - 4; }
  int64_t eos_id() const { return eos >= 0 ? eos : vocab - 3; }
};

// The released model's dimensions (docs: M3_RELEASE_FORMATS.md): 60 layers (0-2 dense MLP of
// 12288 with full attention, 3-59 MoE + MSA), the 32-layer vision tower of 1280, one MTP
// module, 512K positions, rotary theta 5e6; the token ids of the M3 chat tokenizer
// (tests/data/m3-chat). The vision MLP (5120) and projector (6144) widths are not in that page:
// assumed.
RandomM3Shape FullSizeM3Shape();

nlohmann::json RandomM3Config(const RandomM3Shape& s);

}  // namespace m3::bench
