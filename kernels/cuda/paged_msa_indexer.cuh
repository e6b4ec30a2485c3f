// The MSA lightning indexer over paged index keys on the GPU, the twin of
// kernels/cpu/paged_msa_indexer.h (and kernels/cpu/msa_index_fp8.h for FP8 keys): per (index
// head = KV group, row), block scores = the max over each key block of q . k over the row's
// visible keys [0, pos], the local_blocks blocks ending at the row's own forced in (+inf), then
// the top-k blocks by descending score, ties to the lower block, -1 padded. index_q
// [rows, heads, dim] bf16, index keys [slots, dim] bf16 or FP8, selected i32 [heads, rows, topk];
// dot products in f32.
//
// At the real shapes (IndexScoresSupported: dim 128, block 128, 1/2/4/8 heads) the selection is
// scoring (msa_index_scores.cuh: decode rows on CUDA cores, prefill rows on tensor cores) into
// a workspace of block maxima, then top-k (msa_index_topk.cuh); its launches depend on the
// layout's rows, seqs and block-table width only, so decode steps can be graph-captured when
// the caller passes the workspace. Other shapes (the tiny test models) take one generic kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/msa_index_fp8.cuh"
#include "kernels/cuda/paged_layout.cuh"

namespace m3::kernels::cuda {

struct IndexerParams {
  int64_t num_heads = 0;
  int64_t head_dim = 0;  // at most 256
  int64_t block_size = 0;
  int64_t topk_blocks = 0;
  int64_t local_blocks = 0;
};

// Bytes of device workspace PagedIndexerSelect needs for this layout (0: the generic kernel).
size_t IndexerWorkspaceBytes(const PagedLayout& layout, const IndexerParams& p);

// keys: bf16 or FP8 (FP8 only at the real shapes). max_seq_len: the longest context + rows of
// any sequence (the generic kernel's shared-memory bound). workspace: IndexerWorkspaceBytes.
void PagedIndexerSelect(const bf16* index_q, const IndexKeys& keys, const PagedLayout& layout,
                        const IndexerParams& p, int64_t max_seq_len, void* workspace,
                        size_t workspace_bytes, int32_t* selected, cudaStream_t stream);

// The fast path's first half alone for a step of decodes only (rows == seqs) at the shapes
// IndexScoresSupported takes: block scores [rows, heads, *max_blocks] f32 at the workspace's
// start, for a consumer that selects from them itself (PagedMsaDecodeAttention); null, with
// nothing launched, for other steps and shapes.
const float* PagedIndexerDecodeScores(const bf16* index_q, const IndexKeys& keys,
                                      const PagedLayout& layout, const IndexerParams& p,
                                      void* workspace, size_t workspace_bytes, int64_t* max_blocks,
                                      cudaStream_t stream);

// bf16 keys with a workspace this module keeps, grown on demand and never freed (graphs captured
// with an older one may replay); a step under graph capture that would need it to grow takes
// the generic kernel instead. Graph-captured callers should pass their own workspace to
// PagedIndexerSelect.
void PagedIndexerSelectBlocks(const bf16* index_q, const bf16* index_k_pages,
                              const PagedLayout& layout, const IndexerParams& p,
                              int64_t max_seq_len, int32_t* selected, cudaStream_t stream);

}  // namespace m3::kernels::cuda
