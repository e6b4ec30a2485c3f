// IndexTopK: one block per (row, head) sorts (score, block) pairs packed into 64-bit keys
// (order-preserving float bits inverted, so ascending = descending score, then the block index,
// so ties go to the lower block) by a bitonic sort in shared memory over the row's block count
// rounded up to a power of two, and the first k are the answer. At 1024 blocks (128K context)
// that is 55 barrier-separated steps of one compare per thread: a few microseconds, fixed in
// cost whatever the scores are.
#include "kernels/cuda/msa_index_topk.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int64_t kMaxBlocks = 16384;

__device__ __forceinline__ uint64_t SortKey(float v, uint32_t index) {
  const uint32_t bits = __float_as_uint(v);
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
  return (uint64_t{~ordered} << 32) | index;
}

__global__ void __launch_bounds__(kThreads)
    TopKKernel(const float* scores, PagedLayout L, int64_t heads, int64_t block_size,
               int64_t max_blocks, int64_t topk, int64_t local_blocks, int32_t* selected) {
  extern __shared__ uint64_t key[];
  const int64_t r = blockIdx.x, h = blockIdx.y;
  const int64_t s = L.SeqOf(r), pos = L.PositionOf(s, r);
  int64_t nb = pos / block_size + 1;
  if (nb > max_blocks) nb = max_blocks;  // the layout's own bound; never past the workspace
  int64_t n = 1;
  while (n < nb) n <<= 1;
  const float* row = scores + (r * heads + h) * max_blocks;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    if (i < nb) {
      const bool local = i >= nb - local_blocks;  // clamped at block 0, as the twin
      key[i] = SortKey(local ? INFINITY : row[i], static_cast<uint32_t>(i));
    } else {
      key[i] = ~uint64_t{0};
    }
  }
  __syncthreads();
  for (int64_t k = 2; k <= n; k <<= 1)
    for (int64_t j = k >> 1; j > 0; j >>= 1) {
      for (int64_t i = threadIdx.x; i < n; i += kThreads) {
        const int64_t ixj = i ^ j;
        if (ixj > i) {
          const uint64_t x = key[i], y = key[ixj];
          if ((x > y) == ((i & k) == 0)) {
            key[i] = y;
            key[ixj] = x;
          }
        }
      }
      __syncthreads();
    }
  const uint64_t neg_inf = SortKey(-INFINITY, 0) >> 32;
  int32_t* out = selected + (h * L.rows + r) * topk;
  for (int64_t i = threadIdx.x; i < topk; i += kThreads)
    out[i] = i < nb && (key[i] >> 32) != neg_inf ? static_cast<int32_t>(key[i] & 0xffffffffu) : -1;
}

}  // namespace

void IndexTopK(const float* scores, const PagedLayout& layout, int64_t heads, int64_t block_size,
               int64_t max_blocks, int64_t topk, int64_t local_blocks, int32_t* selected,
               cudaStream_t stream) {
  if (layout.rows <= 0 || topk <= 0) return;
  if (max_blocks > kMaxBlocks)
    throw std::runtime_error("MSA top-k: " + std::to_string(max_blocks) +
                             " key blocks per sequence is above the supported " +
                             std::to_string(kMaxBlocks));
  int64_t n = 1;
  while (n < max_blocks) n <<= 1;
  const size_t smem = static_cast<size_t>(n) * sizeof(uint64_t);
  if (smem > 48 * 1024)
    cudaFuncSetAttribute(TopKKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  const dim3 grid(static_cast<unsigned>(layout.rows), static_cast<unsigned>(heads));
  TopKKernel<<<grid, kThreads, smem, stream>>>(scores, layout, heads, block_size, max_blocks, topk,
                                               local_blocks, selected);
  CheckLaunch("IndexTopK");
}

}  // namespace m3::kernels::cuda
