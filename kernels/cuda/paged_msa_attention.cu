// PagedMsaAttention: the fused decode path where it applies, else selection then attention.
#include "kernels/cuda/paged_msa_attention.cuh"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda/msa_index_topk.cuh"

namespace m3::kernels::cuda {

void PagedMsaAttention(const bf16* q, const KvPages& kv, const bf16* index_q, const IndexKeys& keys,
                       const PagedLayout& layout, const AttentionDims& dims,
                       const IndexerParams& ip, int64_t max_seq_len, void* index_workspace,
                       size_t index_workspace_bytes, int32_t* selected, bf16* out,
                       cudaStream_t stream, AttentionWorkspace workspace) {
  if (ip.num_heads != dims.num_kv_heads)
    throw std::runtime_error("MSA attention: " + std::to_string(ip.num_heads) +
                             " index heads for " + std::to_string(dims.num_kv_heads) +
                             " KV groups (one index head per group)");
  // M3_MSA_DECODE_SELECT=0: never the selecting attention (the benchmarks' unfused baseline);
  // read once, as this runs for every MSA layer of every step.
  static const bool may_select = [] {
    const char* env = std::getenv("M3_MSA_DECODE_SELECT");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  int64_t max_blocks = 0;
  const float* scores = may_select
                            ? PagedIndexerDecodeScores(index_q, keys, layout, ip, index_workspace,
                                                       index_workspace_bytes, &max_blocks, stream)
                            : nullptr;
  if (scores == nullptr) {
    PagedIndexerSelect(index_q, keys, layout, ip, max_seq_len, index_workspace,
                       index_workspace_bytes, selected, stream);
  } else if (PagedMsaDecodeAttention(q, kv, layout, dims, scores, max_blocks, ip.local_blocks,
                                     ip.topk_blocks, ip.block_size, selected, out, stream)) {
    return;
  } else {
    IndexTopK(scores, layout, ip.num_heads, ip.block_size, max_blocks, ip.topk_blocks,
              ip.local_blocks, selected, stream);
  }
  PagedBlockSparseAttention(q, kv, layout, dims, selected, ip.topk_blocks, ip.block_size, out,
                            stream, workspace);
}

void PagedMsaAttention(const bf16* q, const bf16* k_pages, const bf16* v_pages, const bf16* index_q,
                       const IndexKeys& keys, const PagedLayout& layout, const AttentionDims& dims,
                       const IndexerParams& ip, int64_t max_seq_len, void* index_workspace,
                       size_t index_workspace_bytes, int32_t* selected, bf16* out,
                       cudaStream_t stream, AttentionWorkspace workspace) {
  PagedMsaAttention(q, Bf16Kv(k_pages, v_pages), index_q, keys, layout, dims, ip, max_seq_len,
                    index_workspace, index_workspace_bytes, selected, out, stream, workspace);
}

}  // namespace m3::kernels::cuda
