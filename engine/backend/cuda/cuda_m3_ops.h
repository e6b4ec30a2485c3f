// The MiniMax-M3 ops on a CUDA device: bf16 activations with f32 accumulation, f32 norms,
// softmax and routing; every op on its kernels/cuda twin, GEMMs on cuBLAS, all queued on the
// device's stream.
#pragma once

#include <memory>

#include "engine/backend/cuda/cuda_device.h"
#include "engine/backend/m3_ops.h"

namespace m3::engine::backend {

// The ops keep a reference to `device` (its stream, cuBLAS handle and op scratch): it must
// outlive them.
std::unique_ptr<M3Ops> MakeCudaM3Ops(CudaDevice& device);

}  // namespace m3::engine::backend
