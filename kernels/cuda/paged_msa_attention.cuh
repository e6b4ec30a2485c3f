// MSA attention of one step on the GPU: the lightning indexer's selection
// (paged_msa_indexer.cuh) and block-sparse attention over it (paged_attention.cuh), the twin of
// kernels/cpu's PagedIndexerSelectBlocks then PagedBlockSparseAttention. A step of few decodes
// (the decode attention's cluster plans) runs the index scan and then one attention kernel that
// makes the top-k itself (PagedMsaDecodeAttention); other steps the scan, the top-k kernel and
// the attention.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/paged_msa_indexer.cuh"

namespace m3::kernels::cuda {

// index_workspace: IndexerWorkspaceBytes(layout, ip) bytes; workspace: the attention's
// (PagedAttentionWorkspaceBytes with ip.topk_blocks). selected i32 [ip.num_heads, rows,
// ip.topk_blocks] receives the selection; ip.num_heads must be dims.num_kv_heads.
void PagedMsaAttention(const bf16* q, const KvPages& kv, const bf16* index_q, const IndexKeys& keys,
                       const PagedLayout& layout, const AttentionDims& dims,
                       const IndexerParams& ip, int64_t max_seq_len, void* index_workspace,
                       size_t index_workspace_bytes, int32_t* selected, bf16* out,
                       cudaStream_t stream, AttentionWorkspace workspace = {});
void PagedMsaAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages, const bf16* index_q,
                       const IndexKeys& keys, const PagedLayout& layout, const AttentionDims& dims,
                       const IndexerParams& ip, int64_t max_seq_len, void* index_workspace,
                       size_t index_workspace_bytes, int32_t* selected, bf16* out,
                       cudaStream_t stream, AttentionWorkspace workspace = {});

}  // namespace m3::kernels::cuda
