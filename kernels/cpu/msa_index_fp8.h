// The FP8 (e4m3) index-key cache of the MSA indexer, the CPU twin of
// kernels/cuda/msa_index_fp8.cuh: each index key vector is stored as e4m3 codes of k / scale
// with one float32 scale per vector, scale = max|k| / 448 (1 for an all-zero vector), rounded
// to nearest even and saturated to +-448 as the GPU's conversion does. The FP8 selection is the
// float selection (paged_msa_indexer.h) over the keys dequantized as code * scale.
#pragma once

#include <cstdint>

#include "kernels/cpu/float8.h"
#include "kernels/cpu/msa_indexer.h"
#include "kernels/cpu/paged_layout.h"

namespace m3::kernels::cpu {

// keys [n, dim] -> codes [n, dim], scales [n].
void QuantizeIndexKeysFp8(const float* keys, int64_t n, int64_t dim, uint8_t* codes, float* scales);
// Key r of keys [rows, dim] into the FP8 cache (codes [slots, dim], scales [slots]) at
// slots[r]; rows with a negative slot are skipped.
void QuantizeIndexKeyRowsFp8(const float* keys, int64_t rows, int64_t dim, const int64_t* slots,
                             uint8_t* codes, float* scales);
// codes [n, dim], scales [n] -> keys [n, dim] (code * scale in float32).
void DequantizeIndexKeysFp8(const uint8_t* codes, const float* scales, int64_t n, int64_t dim,
                            float* keys);

// PagedIndexerSelectBlocks over FP8 index-key pages ([slots, dim] codes, [slots] scales).
void PagedIndexerSelectBlocksFp8(const float* index_q, const uint8_t* codes, const float* scales,
                                 int64_t slots, const PagedLayout& layout, const IndexerParams& p,
                                 int32_t* selected);

}  // namespace m3::kernels::cpu
