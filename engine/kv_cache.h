// Per-layer caches of one sequence for incremental decoding on the CPU backend: keys and values
// ([len, kv_heads, head_dim], post-norm and post-RoPE as attention uses them) and, for sparse
// layers, the indexer's keys ([len, index_head_dim]). Appending never recomputes the past.
#pragma once

#include <cstdint>
#include <vector>

namespace m3::engine {

class LayerKvCache {
 public:
  LayerKvCache(int64_t kv_width, int64_t index_width)
      : kv_width_(kv_width), index_width_(index_width) {}

  // Appends `rows` tokens; idx_k may be null when the layer has no indexer.
  void Append(const float* k, const float* v, const float* idx_k, int64_t rows);

  int64_t length() const { return length_; }
  const float* keys() const { return k_.data(); }
  const float* values() const { return v_.data(); }
  const float* index_keys() const { return idx_k_.data(); }

 private:
  int64_t kv_width_;     // kv_heads * head_dim
  int64_t index_width_;  // index_head_dim, or 0
  int64_t length_ = 0;
  std::vector<float> k_, v_, idx_k_;
};

}  // namespace m3::engine
