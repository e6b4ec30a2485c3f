// The fused post-projection step of a decoder attention layer, the CPU twin of the GPU kernel:
// from one row of the fused projection [q heads | k heads | v heads | index q heads | index k],
// Gemma RMSNorm per head (q_norm / k_norm / index norms), rotate-half RoPE of the leading
// rotary channels (cos/sin rows [rows, rot]; the index heads use the first index_rot of them),
// then q and index q to dense outputs and k, v, index k into their cache pages at the row's
// slot (page * page_size + offset). Pages: k/v [slots, kv_heads, head_dim], index k
// [slots, index_dim].
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

struct QkNormRopeDims {
  int64_t q_heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rot = 0;
  int64_t index_heads = 0;  // 0: no indexer in this layer
  int64_t index_dim = 0;
  int64_t index_rot = 0;
  float eps = 1e-6f;
  // The index key of row r goes to index_k_pages + r * index_dim (a dense [rows, index_dim]
  // buffer, quantized into an FP8 cache afterwards) instead of its slot.
  bool index_k_by_row = false;
  // Likewise k and v of row r to k_pages / v_pages + r * kv_heads * head_dim (dense
  // [rows, kv_heads, head_dim] buffers, quantized into an FP8 KV cache afterwards).
  bool kv_by_row = false;
};

struct QkNormWeightsPtr {
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* index_q_norm = nullptr;
  const float* index_k_norm = nullptr;
};

// qkv [rows, (q_heads + 2 kv_heads) head_dim + (index_heads + 1) index_dim]; q_out
// [rows, q_heads, head_dim]; index_q_out [rows, index_heads, index_dim] (or null).
void QkNormRopeToPages(const float* qkv, int64_t rows, const QkNormRopeDims& dims,
                       const QkNormWeightsPtr& w, const float* cos, const float* sin,
                       const int64_t* slots, float* q_out, float* index_q_out, float* k_pages,
                       float* v_pages, float* index_k_pages);

}  // namespace m3::kernels::cpu
