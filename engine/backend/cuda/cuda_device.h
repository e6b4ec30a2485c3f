// The CUDA device: device memory on one GPU, bf16 weights (matrices; 1-D tensors such as norm
// weights and biases are kept in f32) and bf16 activations; one stream, one cuBLAS handle, the
// step workspace, CUDA graph recording of steps (cuda_graph.h) and sampling on the GPU
// (cuda_sampling.h). Its op sets (cuda_m3_ops.h) queue their kernels on its stream and take
// their scratch from it.
//
// Host exchange: Upload / Download of a bf16 tensor take / give float32 host arrays (converted
// on the device), as the graphs hand the device float32 host data whatever the activation
// dtype; integer and f32 tensors are copied as they are.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "engine/backend/device.h"

namespace m3::engine::backend {

// What the CUDA op sets need of the device beyond the Device interface.
class CudaDevice : public Device {
 public:
  // The stream every op is queued on, with this device's GPU made current for the calling thread
  // (the runner is loaded on one thread and stepped on another).
  virtual cudaStream_t stream() const = 0;
  virtual cublasHandle_t blas() const = 0;  // on stream(), with a fixed workspace
  // Scratch for one op's kernels (split-K partials, block scores), shared by every op: ops run in
  // stream order, so each may reuse what the previous one used. It grows to the largest need
  // seen, outside recordings only (a recorded graph keeps the address it was recorded with, so
  // buffers it outgrew stay alive until the device goes); the decode graphs run a bucket once
  // op by op before recording it, so its needs are met by then. Null for 0 bytes.
  virtual void* OpScratch(size_t bytes) = 0;
};

// device: "cuda" or "cuda:N". Throws kUnavailable when no CUDA driver or GPU can be used and
// kUnsupported for a GPU this build has no code for (compute capability below 9.0).
std::unique_ptr<Device> MakeCudaDevice(const std::string& device);

struct CudaMemory {
  size_t free_bytes = 0, total_bytes = 0;
};
// The GPU's free and total memory now (cudaMemGetInfo: every process's allocations count),
// for sizing the KV cache after the weights are loaded.
CudaMemory CudaMemoryInfo(const std::string& device);

// The stream (a cudaStream_t) every op on a device from MakeCudaDevice is queued on, for
// callers that time or order their own work against it (benchmarks, NCCL collectives).
// kInvalidArgument for any other device.
void* CudaDeviceStream(Device& device);

}  // namespace m3::engine::backend
