// MakeBackend: the backend a device name selects ("cpu", "cuda", "cuda:N"), with a clear error
// for a device this build or machine cannot run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/backend.h"

namespace m3::engine::backend {

// Throws kUnsupported for an unknown device or "cuda" in a build without CUDA, and the CUDA
// backend's errors (no driver / no GPU: kUnavailable; unsupported GPU: kUnsupported).
std::unique_ptr<Backend> MakeBackend(const std::string& device);

// Free and total memory of the device now: a GPU's (every process's allocations count), for
// sizing the KV cache after the weights are loaded; both 0 for "cpu".
struct DeviceMemory {
  int64_t free_bytes = 0, total_bytes = 0;
};
DeviceMemory QueryDeviceMemory(const std::string& device);

// True when this build contains the CUDA backend (nvcc was found at configure time).
bool BuiltWithCuda();

}  // namespace m3::engine::backend
