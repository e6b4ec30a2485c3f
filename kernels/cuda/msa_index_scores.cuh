// The MSA indexer's scoring stage on the GPU: per (row, index head, key block) the block's max
// of q . k over the row's visible keys, written to a workspace scores [rows, heads, max_blocks]
// (f32) that msa_index_topk.cuh selects from. Blocks past a row's position are left unwritten.
// Both kernels use tensor cores (mma.sync m16n8k16 bf16, f32 accumulate) and take the block max
// from the accumulators, so no score matrix is ever stored. Decode rows (sequences of one row):
// the key block as the MMA M dimension and the row's heads padded into N = 8, so each key is
// read once for all heads; blocks stream through a cp.async pipeline (the scan is bound by the
// index-key bytes). Prefill rows: 128 query vectors (rows x heads of one sequence) against key
// blocks staged in shared memory, causal. Keys bf16 or FP8 (e4m3 codes converted exactly to
// bf16, the per-key scale applied to the dot product).
// Shapes: index head_dim 128, block size 128, heads 1, 2, 4 or 8 (IndexScoresSupported).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/msa_index_fp8.cuh"
#include "kernels/cuda/paged_layout.cuh"

namespace m3::kernels::cuda {

bool IndexScoresSupported(int64_t heads, int64_t head_dim, int64_t block_size);

// Upper bound of the prefill tiles of a layout (its rows in runs of 128 / heads per sequence).
int64_t IndexPrefillTileBound(const PagedLayout& layout, int64_t heads);

// tiles int4 [IndexPrefillTileBound]: (sequence, first row, row count, 0) of the sequences with
// more than one row, the rest zero. One block; the launch depends on rows and seqs only.
void IndexPlanPrefillTiles(const PagedLayout& layout, int64_t heads, int4* tiles,
                           cudaStream_t stream);

// Decode rows: every row when all_rows (rows == seqs), else the rows of one-row sequences.
void IndexScoresDecode(const bf16* index_q, const IndexKeys& keys, const PagedLayout& layout,
                       int64_t heads, int64_t max_blocks, bool all_rows, float* scores,
                       cudaStream_t stream);

// Prefill rows, over the planned tiles.
void IndexScoresPrefill(const bf16* index_q, const IndexKeys& keys, const PagedLayout& layout,
                        int64_t heads, int64_t max_blocks, const int4* tiles, int64_t num_tiles,
                        float* scores, cudaStream_t stream);

}  // namespace m3::kernels::cuda
