// The FP8 (e4m3) index-key cache of the MSA indexer on the GPU, the twin of
// kernels/cpu/msa_index_fp8.h: codes [slots, dim] of k / scale with one float32 scale per key
// vector (scale = max|k| / 448, 1 for an all-zero vector; round to nearest even, saturated).
// Half the bytes of bf16 keys for the decode scan, which reads every index key each step.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/paged_layout.cuh"

namespace m3::kernels::cuda {

// The index keys a selection reads: bf16 pages, or FP8 codes + scales (bf16 null).
struct IndexKeys {
  const bf16* bf16_keys = nullptr;     // [slots, dim]
  const uint8_t* fp8_codes = nullptr;  // [slots, dim]
  const float* fp8_scales = nullptr;   // [slots]
  bool fp8() const { return bf16_keys == nullptr; }
};

// Quantizes n consecutive key vectors (a whole cache, e.g. after a bulk fill).
void QuantizeIndexKeysFp8(const bf16* keys, int64_t n, int64_t dim, uint8_t* codes, float* scales,
                          cudaStream_t stream);

// Quantize on write: the bf16 index key each row of the step just wrote (at its position's slot
// of index_k_pages) into the FP8 cache at the same slot. Graph friendly (one warp per row).
void QuantizeStepIndexKeysFp8(const bf16* index_k_pages, const PagedLayout& layout, int64_t dim,
                              uint8_t* codes, float* scales, cudaStream_t stream);

// Quantize on write from a dense buffer: key r of keys [rows, dim] into the FP8 cache at
// slots[r] (rows with a negative slot are skipped). Graph friendly (one warp per row).
void QuantizeIndexKeyRowsFp8(const bf16* keys, int64_t rows, int64_t dim, const int64_t* slots,
                             uint8_t* codes, float* scales, cudaStream_t stream);

}  // namespace m3::kernels::cuda
