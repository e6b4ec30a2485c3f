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
  int64_t vision_hidden = 128, vision_layers = 1, projector = 256;
  // Layer i is full attention when i % full_attention_every == 0 (0: layer 0 alone); the others
  // are MSA. Layer 0's MLP is dense, the others MoE.
  int64_t full_attention_every = 0;
  double rope_theta = 10000000.0;
};

nlohmann::json RandomM3Config(const RandomM3Shape& s);

}  // namespace m3::bench
