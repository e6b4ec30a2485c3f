// PagedIndexerSelect: the fast path (workspace layout: block maxima [rows, heads, max_blocks]
// f32, then the prefill tiles) and the generic kernel for other shapes: one block per
// (row, head); its warps take whole key blocks (warp sums per key, the block max kept by the
// warp), the scores stay in shared memory, and warp 0 picks the top k by k rounds of a warp
// arg-max.
#include "kernels/cuda/paged_msa_indexer.cuh"

#include <climits>
#include <mutex>

#include "kernels/cuda/msa_index_scores.cuh"
#include "kernels/cuda/msa_index_topk.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;

__global__ void IndexerKernel(const bf16* index_q, const bf16* index_k, PagedLayout layout,
                              IndexerParams p, int32_t* selected) {
  extern __shared__ float score[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t r = blockIdx.x, h = blockIdx.y, rows = layout.rows, D = p.head_dim;
  const int64_t s = layout.SeqOf(r), pos = layout.PositionOf(s, r);
  const int64_t B = p.block_size, nb = pos / B + 1;
  float q[kMaxPerLane];
  const bf16* qr = index_q + (r * p.num_heads + h) * D;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    q[i] = c < D ? __bfloat162float(qr[c]) : 0.0f;
  }
  for (int64_t b = warp; b < nb; b += kWarps) {
    float best = -INFINITY;
    const int64_t end = pos + 1 < (b + 1) * B ? pos + 1 : (b + 1) * B;
    for (int64_t j = b * B; j < end; ++j) {
      const bf16* k = index_k + layout.Slot(s, j) * D;
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxPerLane; ++i) {
        const int64_t c = lane + 32 * i;
        if (c < D) dot += q[i] * __bfloat162float(k[c]);
      }
      best = fmaxf(best, WarpSum(dot));
    }
    if (lane == 0) score[b] = best;
  }
  __syncthreads();
  if (warp != 0) return;
  for (int64_t l = 0; l < p.local_blocks; ++l) {
    const int64_t b = nb - 1 - l > 0 ? nb - 1 - l : 0;
    if (lane == 0) score[b] = INFINITY;
  }
  __syncwarp();
  int32_t* out = selected + (h * rows + r) * p.topk_blocks;
  for (int64_t k = 0; k < p.topk_blocks; ++k) {
    float bs = -INFINITY;
    int64_t bi = LLONG_MAX;
    for (int64_t b = lane; b < nb; b += 32)
      if (score[b] > bs) {  // ascending b: the first of equal scores is kept
        bs = score[b];
        bi = b;
      }
    for (int o = 16; o > 0; o >>= 1) {
      const float os = __shfl_xor_sync(0xffffffffu, bs, o);
      const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (os > bs || (os == bs && oi < bi)) {
        bs = os;
        bi = oi;
      }
    }
    // -inf: no block left (taken blocks are set to -inf).
    if (lane == 0) out[k] = bs == -INFINITY ? -1 : static_cast<int32_t>(bi);
    if (lane == 0 && bs != -INFINITY) score[bi] = -INFINITY;
    __syncwarp();
  }
}

int64_t MaxBlocks(const PagedLayout& layout, const IndexerParams& p) {
  return (layout.max_pages * layout.page_size + p.block_size - 1) / p.block_size;
}

size_t ScoreBytes(const PagedLayout& layout, const IndexerParams& p) {
  const size_t n = static_cast<size_t>(layout.rows * p.num_heads * MaxBlocks(layout, p));
  return (n * sizeof(float) + 255) / 256 * 256;
}

void GenericSelect(const bf16* index_q, const bf16* index_k_pages, const PagedLayout& layout,
                   const IndexerParams& p, int64_t max_seq_len, int32_t* selected,
                   cudaStream_t stream) {
  if (p.head_dim > 32 * kMaxPerLane)
    throw std::runtime_error("MSA indexer: index head_dim above 256 is not supported");
  const int64_t max_blocks = max_seq_len / p.block_size + 1;
  const size_t smem = static_cast<size_t>(max_blocks) * sizeof(float);
  if (smem > 48 * 1024) {
    if (smem > 200 * 1024)
      throw std::runtime_error("MSA indexer: context of " + std::to_string(max_seq_len) +
                               " tokens needs more block scores than shared memory holds");
    cudaFuncSetAttribute(IndexerKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  }
  const dim3 grid(static_cast<unsigned>(layout.rows), static_cast<unsigned>(p.num_heads));
  IndexerKernel<<<grid, kWarps * 32, smem, stream>>>(index_q, index_k_pages, layout, p, selected);
  CheckLaunch("PagedIndexerSelectBlocks");
}

}  // namespace

size_t IndexerWorkspaceBytes(const PagedLayout& layout, const IndexerParams& p) {
  if (!IndexScoresSupported(p.num_heads, p.head_dim, p.block_size) || layout.rows <= 0) return 0;
  const size_t tiles = layout.rows == layout.seqs
                           ? 0
                           : static_cast<size_t>(IndexPrefillTileBound(layout, p.num_heads));
  return ScoreBytes(layout, p) + tiles * sizeof(int4);
}

namespace {
void CheckWorkspace(const PagedLayout& layout, const IndexerParams& p, size_t workspace_bytes) {
  if (workspace_bytes < IndexerWorkspaceBytes(layout, p))
    throw std::runtime_error("MSA indexer: workspace of " + std::to_string(workspace_bytes) +
                             " bytes is below the " +
                             std::to_string(IndexerWorkspaceBytes(layout, p)) + " needed");
}
}  // namespace

void PagedIndexerSelect(const bf16* index_q, const IndexKeys& keys, const PagedLayout& layout,
                        const IndexerParams& p, int64_t max_seq_len, void* workspace,
                        size_t workspace_bytes, int32_t* selected, cudaStream_t stream) {
  if (layout.rows <= 0) return;
  if (!IndexScoresSupported(p.num_heads, p.head_dim, p.block_size)) {
    if (keys.fp8())
      throw std::runtime_error(
          "MSA indexer: FP8 index keys need index head_dim 128, block size 128 and 1, 2, 4 or "
          "8 index heads");
    GenericSelect(index_q, keys.bf16_keys, layout, p, max_seq_len, selected, stream);
    return;
  }
  CheckWorkspace(layout, p, workspace_bytes);
  const int64_t max_blocks = MaxBlocks(layout, p);
  float* scores = static_cast<float*>(workspace);
  // rows == seqs: every sequence has one row (a decode step), known without reading the device.
  const bool all_decode = layout.rows == layout.seqs;
  IndexScoresDecode(index_q, keys, layout, p.num_heads, max_blocks, all_decode, scores, stream);
  if (!all_decode) {
    int4* tiles = reinterpret_cast<int4*>(static_cast<uint8_t*>(workspace) + ScoreBytes(layout, p));
    const int64_t num_tiles = IndexPrefillTileBound(layout, p.num_heads);
    IndexPlanPrefillTiles(layout, p.num_heads, tiles, stream);
    IndexScoresPrefill(index_q, keys, layout, p.num_heads, max_blocks, tiles, num_tiles, scores,
                       stream);
  }
  IndexTopK(scores, layout, p.num_heads, p.block_size, max_blocks, p.topk_blocks, p.local_blocks,
            selected, stream);
}

const float* PagedIndexerDecodeScores(const bf16* index_q, const IndexKeys& keys,
                                      const PagedLayout& layout, const IndexerParams& p,
                                      void* workspace, size_t workspace_bytes, int64_t* max_blocks,
                                      cudaStream_t stream) {
  if (layout.rows <= 0 || layout.rows != layout.seqs ||
      !IndexScoresSupported(p.num_heads, p.head_dim, p.block_size))
    return nullptr;
  CheckWorkspace(layout, p, workspace_bytes);
  *max_blocks = MaxBlocks(layout, p);
  float* scores = static_cast<float*>(workspace);
  IndexScoresDecode(index_q, keys, layout, p.num_heads, *max_blocks, true, scores, stream);
  return scores;
}

void PagedIndexerSelectBlocks(const bf16* index_q, const bf16* index_k_pages,
                              const PagedLayout& layout, const IndexerParams& p,
                              int64_t max_seq_len, int32_t* selected, cudaStream_t stream) {
  static std::mutex mu;
  static void* buffer = nullptr;
  static size_t capacity = 0;
  const size_t need = IndexerWorkspaceBytes(layout, p);
  std::lock_guard<std::mutex> lock(mu);
  if (need > capacity) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream, &capture);
    if (capture != cudaStreamCaptureStatusNone) {
      // No allocation inside a capture: this step takes the generic kernel (same selection).
      GenericSelect(index_q, index_k_pages, layout, p, max_seq_len, selected, stream);
      return;
    }
    // The old buffer is kept, not freed: CUDA graphs captured with it may still replay.
    const size_t grown = need + need / 2;
    void* fresh = nullptr;
    if (cudaMalloc(&fresh, grown) != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error("MSA indexer: cannot allocate a workspace of " +
                               std::to_string(grown) + " bytes");
    }
    buffer = fresh;
    capacity = grown;
  }
  PagedIndexerSelect(index_q, IndexKeys{index_k_pages, nullptr, nullptr}, layout, p, max_seq_len,
                     buffer, capacity, selected, stream);
}

}  // namespace m3::kernels::cuda
