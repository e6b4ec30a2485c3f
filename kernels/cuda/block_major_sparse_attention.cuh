// Block-sparse (MSA) attention for the prefill rows of a step, key-block-major: every selected
// key block of a KV group is staged in shared memory once for all the rows that chose it, each
// (row, selected block) leaves a partial output with its log-sum-exp, and a merge combines a
// row's partials in selection order. The query-major kernel (paged_prefill_attention.cuh) loads
// each (row, group)'s own blocks, so when rows share few blocks every selection costs a whole
// block of K/V moved into an SM; here a selection costs its query and its partial.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/paged_attention.cuh"

namespace m3::kernels::cuda {

// Whether the kernel takes these shapes (head_dim 64 or 128, at most 16 q heads per KV group, a
// key block that fits in shared memory).
bool BlockMajorSparseAttentionSupported(const AttentionDims& dims, int64_t block_size);

// Rows [row_begin, layout.rows) attend to their selected blocks (selected [kv_heads, rows, topk],
// -1 = empty, repeats and blocks past the row's position ignored), as PagedBlockSparseAttention.
// Scratch (the inverted index and the partials) comes from the stream's memory pool; the rows
// are taken in passes so that it stays within `scratch_budget` bytes. Returns false, having
// launched nothing, when that scratch cannot be allocated (the caller falls back).
bool BlockMajorSparseAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                               int64_t row_begin, const AttentionDims& dims,
                               const int32_t* selected, int64_t topk, int64_t block_size, bf16* out,
                               cudaStream_t stream, size_t scratch_budget = size_t{1} << 30);

}  // namespace m3::kernels::cuda
