// The CUDA backend: device memory on one GPU, bf16 weights (matrices; 1-D tensors such as norm
// weights and biases are kept in f32) and bf16 activations with f32 accumulation, f32 norms,
// softmax and routing; every op on its kernels/cuda twin, GEMMs on cuBLAS; one stream.
//
// Host exchange: Upload / Download of a bf16 tensor take / give float32 host arrays (converted
// on the device), as the graphs hand the backend float32 host data whatever the activation
// dtype; integer and f32 tensors are copied as they are.
#pragma once

#include <memory>
#include <string>

#include "engine/backend/backend.h"

namespace m3::engine::backend {

// device: "cuda" or "cuda:N". Throws kUnavailable when no CUDA driver or GPU can be used and
// kUnsupported for a GPU this build has no code for (compute capability below 9.0).
std::unique_ptr<Backend> MakeCudaBackend(const std::string& device);

struct CudaMemory {
  size_t free_bytes = 0, total_bytes = 0;
};
// The GPU's free and total memory now (cudaMemGetInfo: every process's allocations count),
// for sizing the KV cache after the weights are loaded.
CudaMemory CudaMemoryInfo(const std::string& device);

// The stream (a cudaStream_t) every op of a backend from MakeCudaBackend is queued on, for
// callers that time or order their own work against the backend's (benchmarks).
// kInvalidArgument for any other backend.
void* CudaBackendStream(Backend& backend);

}  // namespace m3::engine::backend
