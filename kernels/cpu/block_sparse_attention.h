// Block-sparse attention (MSA): each query of KV group g attends only to the key blocks the
// indexer selected for (g, query), intersected with the causal mask. Layouts as in attention.h;
// block_indices is [Hkv, Tq, topk] with -1 for empty slots (order within a row is irrelevant).
#pragma once

#include <cstdint>

#include "kernels/cpu/attention.h"

namespace m3::kernels::cpu {

void BlockSparseAttention(const float* q, int64_t tq, const float* k, const float* v, int64_t tk,
                          const AttentionDims& dims, const int64_t* q_pos,
                          const int64_t* block_indices, int64_t topk, int64_t block_size,
                          float* out);

}  // namespace m3::kernels::cpu
