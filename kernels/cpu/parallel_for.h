// ParallelFor: a small persistent std::thread pool that splits an index range into chunks. The
// CPU reference ops use it for the work BLAS does not cover (attention, indexer, fallback GEMM).
// The thread count comes from M3_NUM_THREADS (default: hardware concurrency). Calls made from
// inside a worker run serially, so nested use cannot deadlock.
#pragma once

#include <cstdint>
#include <functional>

namespace m3::kernels::cpu {

// Runs fn(begin, end) over disjoint sub-ranges covering [0, n); returns when all are done.
// `grain` is the smallest chunk worth handing to another thread.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

int NumThreads();

}  // namespace m3::kernels::cpu
