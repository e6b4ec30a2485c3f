// SmallMGemm: y[m, n] = sum_k x[m, k] * wt[k, n] for few rows (the
// per-expert groups of a decode step, M of 1 to a few dozen) against a weight stored K-major
// (the transpose of the nn.Linear layout, so one k step reads a contiguous run of outputs).
// A BLAS sgemm repacks the whole weight on every call, which at small M costs as much as the
// arithmetic; this kernel streams the weight once per tile of rows with no packing, keeping a
// register tile of rows x columns of accumulators, and is chosen per machine (AVX-512, AVX2 +
// FMA, or portable loops).
//
// Every output element is one fused multiply-add chain over k in increasing order, started
// from zero, whatever the row count, row tile or column tile: a row's result does not depend on
// which other rows share the call (batched equals alone, bit for bit, on one machine and ISA).
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

enum class GemmIsa { kPortable, kAvx2, kAvx512 };

// False when the environment sets M3_CPU_SMALL_M=0: Linear then always runs sgemm and the CPU
// backend keeps expert weights in the nn.Linear layout on the per-expert sgemm path (the
// behaviour before these kernels, for side-by-side measurement). Read once.
bool SmallMKernelsEnabled();

// The widest path this CPU runs.
GemmIsa BestGemmIsa();
const char* GemmIsaName(GemmIsa isa);
// Whether this CPU can run `isa` (tests run every supported path).
bool CpuSupports(GemmIsa isa);

// y[m, n] = x[m, k] * wt[k, n] on sub-matrices: row strides ldx, ldw and ldy, so a caller
// splitting the columns across threads passes wt + c0 and y + c0. Single-threaded.
void SmallMGemmKMajor(const float* x, int64_t m, int64_t ldx, int64_t k, const float* wt,
                      int64_t ldw, int64_t n, float* y, int64_t ldy, GemmIsa isa);

inline void SmallMGemmKMajor(const float* x, int64_t m, int64_t ldx, int64_t k, const float* wt,
                             int64_t ldw, int64_t n, float* y, int64_t ldy) {
  SmallMGemmKMajor(x, m, ldx, k, wt, ldw, n, y, ldy, BestGemmIsa());
}

}  // namespace m3::kernels::cpu
