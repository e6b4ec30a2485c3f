// PagedLayout on the GPU, the twin of kernels/cpu/paged_layout.h: the same device arrays (row
// runs of each sequence, context lengths, block tables) and the same row -> sequence, row ->
// position and position -> slot maps, as device functions.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

struct PagedLayout {
  int64_t seqs = 0;
  int64_t rows = 0;
  const int32_t* query_start = nullptr;   // [seqs + 1], device
  const int32_t* context_lens = nullptr;  // [seqs], device
  const int32_t* block_tables = nullptr;  // [seqs, max_pages], device
  int64_t max_pages = 0;
  int64_t page_size = 0;
  // Rows [0, num_decodes) are decodes (query length 1); 0 when not known, and then the
  // attention kernels treat every row alike.
  int64_t num_decodes = 0;

#ifdef __CUDACC__
  // The sequence owning row r (binary search over query_start).
  __device__ __forceinline__ int64_t SeqOf(int64_t r) const {
    int64_t lo = 0, hi = seqs;  // query_start[lo] <= r < query_start[hi]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (query_start[mid] <= r)
        lo = mid;
      else
        hi = mid;
    }
    return lo;
  }
  __device__ __forceinline__ int64_t PositionOf(int64_t s, int64_t r) const {
    return context_lens[s] + (r - query_start[s]);
  }
  // The cache slot (page * page_size + offset) of key position j of sequence s. 32-bit division
  // (positions and page sizes fit): a 64-bit one is a long instruction sequence, and loaders
  // look slots up per copied key.
  __device__ __forceinline__ int64_t Slot(int64_t s, int64_t j) const {
    const int32_t jj = static_cast<int32_t>(j), ps = static_cast<int32_t>(page_size);
    return int64_t{block_tables[s * max_pages + jj / ps]} * ps + jj % ps;
  }
#endif
};

}  // namespace m3::kernels::cuda
