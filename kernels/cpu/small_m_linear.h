// SmallMLinear: y[m, n] = x[m, k] * w[n, k]^T (+ bias[n]) for few rows against a weight in the
// nn.Linear layout, with no repacking: each register tile holds up to 6 rows x 4 output
// columns of 16-lane partial sums, streams the 4 weight rows along k (contiguous) and reduces
// each partial sum at the end. sgemm repacks the weight on every call, which at decode-step
// sizes costs as much as the arithmetic, and its worker threads spin between the many small
// calls of a step. AVX-512 only; elsewhere it declines and the caller uses sgemm.
//
// Each output element is the same sum (16 lane chains over k in order, then a fixed reduction
// tree) whatever the number of rows or the tiles: a row's result does not depend on which
// other rows share the call.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

// Rows up to which Linear takes this path: up to 32 rows it matches or beats sgemm on one
// thread (docs/perf-log/cpu-serving.md), and it leaves sgemm's worker threads asleep.
constexpr int64_t kSmallLinearRows = 32;

// Computes the product and returns true, or returns false (leaving y alone) when this CPU has
// no AVX-512. Parallel over column blocks (ParallelFor).
bool SmallMLinear(const float* x, int64_t m, int64_t k, const float* w, int64_t n,
                  const float* bias, float* y);

}  // namespace m3::kernels::cpu
