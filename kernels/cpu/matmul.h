// Linear: y[m, n] = x[m, k] * w[n, k]^T (+ bias[n]), the PyTorch nn.Linear layout. Uses
// cblas_sgemm when the build found a CBLAS (M3_HAVE_CBLAS), else a plain multithreaded loop, so
// the engine core also builds on machines without a BLAS.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

void Linear(const float* x, int64_t m, int64_t k, const float* w, int64_t n, const float* bias,
            float* y);

// y[m, n] = x[m, k] * wt[k, n]: the same product with the weight stored K-major (transposed),
// the layout the CPU backend keeps expert weights in for SmallMGemmKMajor. CBLAS when built
// with it, else SmallMGemmKMajor over column tiles in parallel.
void LinearKMajor(const float* x, int64_t m, int64_t k, const float* wt, int64_t n, float* y);

// True when Linear runs on a BLAS (reported by the runner).
bool LinearUsesBlas();

}  // namespace m3::kernels::cpu
