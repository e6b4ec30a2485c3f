// Split-K (flash-decoding) attention for the decode rows of a step, the rows [0, num_decodes)
// with query length 1: one CTA per (row, KV group, split) attends all q heads of the group on
// tensor cores, so each K/V byte is read once; splits write partial (max, sum, output) that a
// combine kernel merges (one split writes the output directly), or, for sparse rows at small
// batch, run as one thread-block cluster per (row, group) that merges on chip. Dense splits are
// equal key ranges sized from the block-table width; block-sparse splits are equal ranges of the
// row's selected blocks laid end to end (empty, repeated and past-position keys masked). The launch
// depends only on num_decodes, the block-table width, topk and the block size, never on
// context lengths (CUDA graphs).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/paged_attention.cuh"

namespace m3::kernels::cuda {

// The split count and dense split length (keys) for a step's decode rows; topk > 0: sparse.
// cluster > 0 (sparse only, splits == cluster): each (row, group)'s splits run as one
// thread-block cluster and merge on chip, without a workspace.
struct DecodePlan {
  int64_t splits = 1;
  int64_t chunk = 0;
  int64_t cluster = 0;
};
DecodePlan PlanDecode(int64_t num_decodes, int64_t max_keys, const AttentionDims& dims,
                      int64_t topk);

// Bytes of f32 partials the plan needs (0 when a single split writes the output directly).
size_t DecodeWorkspaceBytes(const DecodePlan& plan, int64_t num_decodes, const AttentionDims& dims);

// Whether the tensor-core paths take these shapes (head_dim 64 or 128, 1 to 16 q heads per KV
// group); others use the reference kernel.
bool TensorCoreAttentionSupported(const AttentionDims& dims);

// Sparse decode rows that select their own blocks, the top-k made inside the attention kernel:
// the indexer's block scores [rows, kv_heads, max_blocks] f32 (msa_index_scores.cuh) and its
// forced local blocks; the selection IndexTopK would make from them is written to `selected`
// [kv_heads, rows, topk]. Saves the top-k kernel and one launch dependency in the chain of a
// small-batch decode step.
struct DecodeBlockScores {
  const float* scores = nullptr;
  int64_t max_blocks = 0;
  int64_t local_blocks = 0;
  int32_t* selected = nullptr;
};

// Whether a plan's kernel selects from block scores of max_blocks blocks: cluster plans, the
// row's keys staged in the tiles' shared memory (up to about 8K blocks for head_dim 128, 4K
// for 64).
bool DecodeSelectsBlocks(const DecodePlan& plan, int64_t max_blocks, int64_t head_dim);

// selected == null: dense. kv: bf16 or FP8 pages (kv_cache_fp8.cuh). `workspace` holds
// DecodeWorkspaceBytes(plan, ...) bytes. select: the selection made from block scores instead of
// read from `selected` (then ignored), where DecodeSelectsBlocks.
void PagedDecodeAttention(const bf16* q, const KvPages& kv, const PagedLayout& layout,
                          int64_t num_decodes, const AttentionDims& dims, const int32_t* selected,
                          int64_t topk, int64_t block_size, const DecodePlan& plan,
                          float* workspace, bf16* out, cudaStream_t stream,
                          const DecodeBlockScores* select = nullptr);

}  // namespace m3::kernels::cuda
