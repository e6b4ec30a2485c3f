// Tensor-core flash attention for the prefill rows of a step (rows [row_begin, rows), query
// length > 1; decode rows too when row_begin is 0): a CTA takes a few consecutive rows x the q
// heads of one KV group as its M (16 per warp), streams the keys of each sequence in its rows
// (dense: [0, last position]; block-sparse: the union of its rows' selected blocks, each row
// masked to its own selection) through shared memory, and keeps an f32 online softmax.
#pragma once

#include <cstdint>

#include "kernels/cuda/paged_attention.cuh"

namespace m3::kernels::cuda {

// selected == null: dense causal. Needs TensorCoreAttentionSupported(dims) and topk <= 64.
void PagedPrefillAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                           int64_t row_begin, const AttentionDims& dims, const int32_t* selected,
                           int64_t topk, int64_t block_size, bf16* out, cudaStream_t stream);

}  // namespace m3::kernels::cuda
