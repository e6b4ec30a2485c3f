// Attention over a paged KV cache on the GPU, the twin of kernels/cpu/paged_attention.h: every
// row of a flat batch (decodes and prefill chunks) attends causally to its own sequence's keys
// through the block table; the block-sparse variant (MSA) only to the selected key blocks of the
// row's KV group (selected [kv_heads, rows, topk], -1 = empty, duplicates counted once),
// clipped to [0, pos]. K/V pages [pages, page_size, kv_heads, head_dim] bf16; q / out
// [rows, q_heads, head_dim] bf16; scores, softmax and accumulation in f32.
// Decode rows (the first layout.num_decodes, query length 1) take split-K flash decoding
// (paged_decode_attention.cuh), the other rows tensor-core flash attention
// (paged_prefill_attention.cuh), or, block-sparse with 256 or more of them, key-block-major
// attention (block_major_sparse_attention.cuh); shapes those do not take (head_dim other than
// 64 / 128, more than 16 q heads per KV group, topk above 64) use the one-warp-per-(row, head)
// reference kernel. Each entry point takes its pages as KvPages, bf16 or FP8 e4m3 codes with
// per-(slot, kv head) scales (kv_cache_fp8.cuh), or as bf16 k / v pointers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/kv_cache_fp8.cuh"
#include "kernels/cuda/paged_layout.cuh"

namespace m3::kernels::cuda {

struct AttentionDims {
  int64_t num_q_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // at most 256
  float scale = 1.0f;
};

// Device scratch for the split-K decode partials, preallocated by the caller so a step can be
// captured in a CUDA graph. With data == null the entry points take it from the stream's memory
// pool (cudaMallocAsync / cudaFreeAsync) when they need it.
struct AttentionWorkspace {
  void* data = nullptr;
  size_t bytes = 0;
};

// The workspace bytes a step needs; depends only on layout.num_decodes, layout.max_pages,
// layout.page_size, the dims and topk (0: dense), not on context lengths.
size_t PagedAttentionWorkspaceBytes(const PagedLayout& layout, const AttentionDims& dims,
                                    int64_t topk);

void PagedAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                    const AttentionDims& dims, bf16* out, cudaStream_t stream,
                    AttentionWorkspace workspace = {});
void PagedAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                    const PagedLayout& layout, const AttentionDims& dims, bf16* out,
                    cudaStream_t stream, AttentionWorkspace workspace = {});

void PagedBlockSparseAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                               const AttentionDims& dims, const int32_t* selected, int64_t topk,
                               int64_t block_size, bf16* out, cudaStream_t stream,
                               AttentionWorkspace workspace = {});

void PagedBlockSparseAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                               const PagedLayout& layout, const AttentionDims& dims,
                               const int32_t* selected, int64_t topk, int64_t block_size, bf16* out,
                               cudaStream_t stream, AttentionWorkspace workspace = {});

// Block-sparse attention of a step of decodes only (layout.num_decodes == layout.rows) that
// selects each row's blocks inside the attention kernel from the MSA indexer's block scores
// [rows, kv_heads, max_blocks] f32 (msa_index_scores.cuh), writing the selection IndexTopK would
// make to `selected` [kv_heads, rows, topk]: no top-k kernel and one launch dependency less. It
// applies where the decode plan runs clusters (few rows) and the tensor-core paths take the
// shapes; false, with nothing launched, elsewhere (then IndexTopK and PagedBlockSparseAttention).
// Launched right after the kernel that writes the scores (a chained launch): q and the layout's
// arrays are read before it waits on that kernel, so they must be written before it starts.
bool PagedMsaDecodeAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                             const AttentionDims& dims, const float* scores, int64_t max_blocks,
                             int64_t local_blocks, int64_t topk, int64_t block_size,
                             int32_t* selected, bf16* out, cudaStream_t stream);
bool PagedMsaDecodeAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                             const PagedLayout& layout, const AttentionDims& dims,
                             const float* scores, int64_t max_blocks, int64_t local_blocks,
                             int64_t topk, int64_t block_size, int32_t* selected, bf16* out,
                             cudaStream_t stream);

// The one-warp-per-(row, q head) kernel for every row: the fallback for unsupported shapes and a
// second GPU reference for the tests. selected == null: dense.
void PagedAttentionReference(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                             const AttentionDims& dims, const int32_t* selected, int64_t topk,
                             int64_t block_size, bf16* out, cudaStream_t stream);
void PagedAttentionReference(const bf16* q, const bf16* k_pages, const bf16* v_pages,
                             const PagedLayout& layout, const AttentionDims& dims,
                             const int32_t* selected, int64_t topk, int64_t block_size, bf16* out,
                             cudaStream_t stream);

}  // namespace m3::kernels::cuda
