// The MSA indexer's selection stage on the GPU: per (row, index head) the top-k key blocks of
// the block maxima that msa_index_scores.cuh wrote (scores [rows, heads, max_blocks]), the
// local_blocks blocks ending at the row's own forced in (+inf), by descending score, ties to
// the lower block, -1 padded (selected [heads, rows, topk]), as kernels/cpu/paged_msa_indexer.h.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/paged_layout.cuh"

namespace m3::kernels::cuda {

// The launch depends on rows, heads and max_blocks only (max_blocks <= 16384); each row's
// block count is read on the device.
void IndexTopK(const float* scores, const PagedLayout& layout, int64_t heads, int64_t block_size,
               int64_t max_blocks, int64_t topk, int64_t local_blocks, int32_t* selected,
               cudaStream_t stream);

}  // namespace m3::kernels::cuda
