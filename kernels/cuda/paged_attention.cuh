// Attention over a paged KV cache on the GPU, the twin of kernels/cpu/paged_attention.h: every
// row of a flat batch (decodes and prefill chunks) attends causally to its own sequence's keys
// through the block table; the block-sparse variant (MSA) only to the selected key blocks of the
// row's KV group (selected [kv_heads, rows, topk], -1 = empty, duplicates counted once),
// clipped to [0, pos]. K/V pages [pages, page_size, kv_heads, head_dim] bf16; q / out
// [rows, q_heads, head_dim] bf16; scores, softmax and accumulation in f32.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/paged_layout.cuh"

namespace m3::kernels::cuda {

struct AttentionDims {
  int64_t num_q_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // at most 256
  float scale = 1.0f;
};

void PagedAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                    const PagedLayout& layout, const AttentionDims& dims, bf16* out,
                    cudaStream_t stream);

void PagedBlockSparseAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                               const PagedLayout& layout, const AttentionDims& dims,
                               const int32_t* selected, int64_t topk, int64_t block_size, bf16* out,
                               cudaStream_t stream);

}  // namespace m3::kernels::cuda
