// The MiniMax-M3 ops on the CPU device: every op on its kernels/cpu reference kernel (OpenBLAS
// GEMM where the build found it, ParallelFor elsewhere), float32 throughout.
#pragma once

#include <memory>

#include "engine/backend/cpu/cpu_device.h"
#include "engine/backend/m3_ops.h"

namespace m3::engine::backend {

// The ops read and write `device`'s host buffers directly (no workspace or stream of its own).
std::unique_ptr<M3Ops> MakeCpuM3Ops(CpuDevice& device);

}  // namespace m3::engine::backend
