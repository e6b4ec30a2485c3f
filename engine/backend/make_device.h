// MakeDevice: the device a name selects ("cpu", "cuda", "cuda:N"), with a clear error for a
// device this build or machine cannot run. A model's op set is then made on it
// (make_m3_ops.h for MiniMax-M3).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/device.h"

namespace m3::engine::backend {

// Throws kUnsupported for an unknown device or "cuda" in a build without CUDA, and the CUDA
// device's errors (no driver / no GPU: kUnavailable; unsupported GPU: kUnsupported).
std::unique_ptr<Device> MakeDevice(const std::string& device);

// Free and total memory of the device now: a GPU's (every process's allocations count), for
// sizing the KV cache after the weights are loaded; both 0 for "cpu".
struct DeviceMemory {
  int64_t free_bytes = 0, total_bytes = 0;
};
DeviceMemory QueryDeviceMemory(const std::string& device);

// True when this build contains the CUDA device (nvcc was found at configure time).
bool BuiltWithCuda();

}  // namespace m3::engine::backend
