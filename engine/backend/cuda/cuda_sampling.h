// The CUDA device's SampleRows: packs each row's sampling parameters, its unique history tokens
// (with their output counts; only where a penalty is on) and its min_tokens masks, uploads them,
// runs kernels/cuda/sampling on the logits where they lie and downloads only the chosen tokens
// and logprobs.
#pragma once

#include <cuda_runtime.h>

#include <span>
#include <vector>

#include "engine/backend/device.h"

namespace m3::engine::backend {

// `device` allocates the step's scratch and moves the packed inputs / results; the kernel runs
// on `stream` (the device's). Throws kInternal on a malformed logits tensor or a failed launch.
void CudaSampleRows(Device& device, cudaStream_t stream, const DeviceTensor& logits,
                    std::span<const SampleRow> rows, std::vector<SampledToken>& out);

}  // namespace m3::engine::backend
