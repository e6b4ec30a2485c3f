// The CPU backend: host memory, float32 weights and activations, every op on the kernels/cpu
// reference kernels (OpenBLAS GEMM where the build found it, ParallelFor elsewhere).
#pragma once

#include <memory>

#include "engine/backend/backend.h"

namespace m3::engine::backend {

std::unique_ptr<Backend> MakeCpuBackend();

}  // namespace m3::engine::backend
