// Grouped execution of the routed experts of a MoE layer, the CPU twin of the GPU
// permute -> grouped GEMM -> un-permute kernels: tokens are permuted so each expert's tokens
// are contiguous (stable, in row order), each expert runs gate_up GEMM -> SwiGLU-OAI -> down
// GEMM once over its group, and the outputs are un-permuted with the routing weights:
//   out[r] = scale * sum_j weights[r, j] * expert_{ids[r, j]}(x[r]) + out[r],
// the sum over j in increasing expert id (the reference's accumulation order).
// ids lie in [0, experts) (the router guarantees it) or are negative: a pick of an expert
// another rank holds (expert parallelism), which adds nothing here. Weights are stacked:
// gate_up [experts, 2 * inter, hidden] (gate rows, then up rows), down [experts, hidden, inter].
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

struct MoeExpertsDims {
  int64_t hidden = 0;
  int64_t inter = 0;
  int64_t experts = 0;
  int64_t topk = 0;
  float alpha = 1.702f;  // SwiGLU-OAI
  float limit = 7.0f;
  float scale = 1.0f;  // routed_scaling_factor
};

void MoeGroupedExperts(const float* x, int64_t rows, const int32_t* ids, const float* weights,
                       const float* gate_up, const float* down, const MoeExpertsDims& dims,
                       float* out);

// The same computation on K-major stacks, the layout the CPU backend keeps expert weights in:
// gate_up_t [experts, hidden, 2 * inter] (gate columns, then up columns), down_t [experts,
// inter, hidden] (TransposeEachExpert of the stacks above). Groups of at most kSmallExpertRows
// rows (the common case in decode steps; sgemm is no faster up to 32 rows) run SmallMGemmKMajor,
// larger ones sgemm; a row of a small group comes out the same whatever other rows share its group.
constexpr int64_t kSmallExpertRows = 32;
void MoeGroupedExpertsKMajor(const float* x, int64_t rows, const int32_t* ids, const float* weights,
                             const float* gate_up_t, const float* down_t,
                             const MoeExpertsDims& dims, float* out);

// out[e] = w[e]^T for each of the experts' [rows, cols] matrices (in parallel). Applied to a
// K-major stack with rows and cols swapped, it gives back the nn.Linear layout.
void TransposeEachExpert(const float* w, int64_t experts, int64_t rows, int64_t cols, float* out);

}  // namespace m3::kernels::cpu
