// Attention over a paged KV cache, the CPU twin of the GPU paged-attention kernels: every row of
// a flat batch (decodes and prefill chunks of many sequences, see paged_layout.h) attends
// causally to its own sequence's keys, read through the block table. K/V pages are
// [pages, page_size, kv_heads, head_dim]; q/out [rows, q_heads, head_dim]. GQA as attention.h.
// The dense variant sees keys [0, pos]; the block-sparse one (MSA) only the selected key
// blocks of the row's KV group (selected [kv_heads, rows, topk], -1 = empty slot), clipped to
// [0, pos]. The arithmetic is AttendRanges', so results equal the contiguous kernels'.
// Overloads on Fp8KvPages read the FP8 KV cache (kv_cache_fp8.h): the same arithmetic over
// each key and value dequantized as code * scale.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_cache_fp8.h"
#include "kernels/cpu/paged_layout.h"

namespace m3::kernels::cpu {

void PagedAttention(const float* q, const float* k_pages, const float* v_pages,
                    const PagedLayout& layout, const AttentionDims& dims, float* out);

void PagedBlockSparseAttention(const float* q, const float* k_pages, const float* v_pages,
                               const PagedLayout& layout, const AttentionDims& dims,
                               const int32_t* selected, int64_t topk, int64_t block_size,
                               float* out);

void PagedAttention(const float* q, const Fp8KvPages& kv, const PagedLayout& layout,
                    const AttentionDims& dims, float* out);

void PagedBlockSparseAttention(const float* q, const Fp8KvPages& kv, const PagedLayout& layout,
                               const AttentionDims& dims, const int32_t* selected, int64_t topk,
                               int64_t block_size, float* out);

}  // namespace m3::kernels::cpu
