// The FP8 (e4m3) KV cache on the CPU, the twin of kernels/cuda/kv_cache_fp8.cuh: K and V pages
// hold e4m3 codes [slots, kv_heads, head_dim] of x / scale with one float32 scale per
// (slot, kv head) vector, [slots, kv_heads], quantized as the FP8 index keys are
// (msa_index_fp8.h with float8.h's codec: scale = max|x| / 448, 1 for an all-zero vector; round to
// nearest even, saturated). Attention over them (paged_attention.h) dequantizes each key and value
// as code * scale in float32 and computes as over float pages.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

struct Fp8KvPages {
  const uint8_t* k_codes = nullptr;  // [slots, kv_heads, head_dim]
  const float* k_scales = nullptr;   // [slots, kv_heads]
  const uint8_t* v_codes = nullptr;
  const float* v_scales = nullptr;
};

// Row r of x [rows, heads, dim] into the cache (codes [slots, heads, dim], scales
// [slots, heads]) at slots[r], one scale per head; rows with a negative slot are skipped.
void QuantizeKvRowsFp8(const float* x, int64_t rows, int64_t heads, int64_t dim,
                       const int64_t* slots, uint8_t* codes, float* scales);

// code * scale for the `dim` codes of one vector.
void DequantizeKvVectorFp8(const uint8_t* codes, float scale, int64_t dim, float* out);

}  // namespace m3::kernels::cpu
