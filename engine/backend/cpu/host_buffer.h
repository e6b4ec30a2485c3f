// HostBuffer: the CPU device's memory, 64-byte aligned host allocations counted in a live-bytes
// total that outlives the device (buffers may outlive it: encoder cache entries). A buffer also
// says whether it holds an expert stack stored K-major (cpu_device.h), which the CPU ops and the
// device's Upload / Download read.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/backend/device_tensor.h"
#include "shared/error.h"

namespace m3::engine::backend {

class HostBuffer : public DeviceBuffer {
 public:
  HostBuffer(size_t bytes, std::shared_ptr<std::atomic<size_t>> live)
      : bytes_(bytes), live_(std::move(live)) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, rounded);
    Require(data_ != nullptr, ErrorCode::kResourceExhausted,
            "out of host memory allocating " + std::to_string(bytes) + " bytes");
    *live_ += bytes_;
  }
  ~HostBuffer() override {
    std::free(data_);
    *live_ -= bytes_;
  }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }
  // Set when the buffer holds an expert stack with each expert transposed.
  bool k_major_experts = false;

 private:
  void* data_ = nullptr;
  size_t bytes_;
  std::shared_ptr<std::atomic<size_t>> live_;
};

inline bool IsKMajorExperts(const DeviceTensor& t) {
  const auto* b = dynamic_cast<const HostBuffer*>(t.buffer.get());
  return b && b->k_major_experts;
}

}  // namespace m3::engine::backend
