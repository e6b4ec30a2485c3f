// CUDA graph capture of one step's ops on the device's stream, and its replay: the StepGraph of
// the CUDA device. Capture failures (an op that synchronizes with the host, an unsupported
// call) end the capture cleanly and leave the stream usable, so the caller can run eagerly.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>

#include "engine/backend/device.h"

namespace m3::engine::backend {

// Records `ops` issued on `stream` (capture mode thread-local: other threads' CUDA calls are
// not affected). Returns null when the capture failed; exceptions thrown by `ops` propagate
// after the capture has been ended.
std::unique_ptr<StepGraph> CaptureCudaGraph(cudaStream_t stream, const std::function<void()>& ops);

}  // namespace m3::engine::backend
