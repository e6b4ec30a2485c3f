// The fused post-projection step of a decoder attention layer on the GPU, the twin of
// kernels/cpu/qk_norm_rope.h: per head Gemma RMSNorm (f32), rotate-half RoPE of the leading
// rotary channels, q and index q to dense outputs, k, v and the index key into their cache pages
// at the row's slot. Same layouts as the CPU twin, bf16 storage; or, with the FP8 KV cache
// (kv_cache_fp8.cuh), k and v quantized per (row, kv head) from their f32 values into e4m3
// codes and a scale at the row's slot, as the CPU twin quantizes them.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/kv_cache_fp8.cuh"

namespace m3::kernels::cuda {

struct QkNormRopeDims {
  int64_t q_heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;  // at most 256
  int64_t rot = 0;
  int64_t index_heads = 0;  // 0: no indexer in this layer
  int64_t index_dim = 0;    // at most 256
  int64_t index_rot = 0;
  float eps = 1e-6f;
  // The index key of row r goes to index_k_pages + r * index_dim (a dense [rows, index_dim]
  // buffer, quantized into an FP8 cache afterwards) instead of its slot.
  bool index_k_by_row = false;
};

struct QkNormWeightsPtr {
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* index_q_norm = nullptr;
  const float* index_k_norm = nullptr;
};

// The rotary rows of a step from its positions, as kernels/cpu/rope.h's RopeCosSin computes them
// (angle = float(position) * inv_freq[i] in f32, its cosine and sine in f64, rounded to f32):
// cos / sin f32 [rows, 2 * half], each row [freqs, freqs]; positions i32 [rows], inv_freq
// f32 [half].
void RopeTables(const int32_t* positions, int64_t rows, const float* inv_freq, int64_t half,
                float* cos, float* sin, cudaStream_t stream);

// cos / sin f32 [rows, rot]; slots i64 [rows].
void QkNormRopeToPages(const bf16* qkv, int64_t rows, const QkNormRopeDims& dims,
                       const QkNormWeightsPtr& w, const float* cos, const float* sin,
                       const int64_t* slots, bf16* q_out, bf16* index_q_out, bf16* k_pages,
                       bf16* v_pages, bf16* index_k_pages, cudaStream_t stream);
// The same with K and V written into the FP8 KV cache `kv`.
void QkNormRopeToPages(const bf16* qkv, int64_t rows, const QkNormRopeDims& dims,
                       const QkNormWeightsPtr& w, const float* cos, const float* sin,
                       const int64_t* slots, bf16* q_out, bf16* index_q_out, const Fp8KvOut& kv,
                       bf16* index_k_pages, cudaStream_t stream);

}  // namespace m3::kernels::cuda
