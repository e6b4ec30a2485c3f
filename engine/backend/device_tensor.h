// DeviceTensor: a typed, row-major view into a buffer a Device allocated (host memory for the
// CPU device, device memory for a GPU one). Views share their buffer, so weights, KV pages,
// encoder outputs and step activations are all the same kind of handle; only the device that
// made a buffer (and the op sets on it) dereferences it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "shared/dtype.h"
#include "shared/error.h"
#include "shared/tensor.h"

namespace m3::engine::backend {

class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
};

struct DeviceTensor {
  std::shared_ptr<DeviceBuffer> buffer;
  size_t offset = 0;  // bytes into the buffer
  DType dtype = DType::kF32;
  Shape shape;

  explicit operator bool() const { return buffer != nullptr; }
  int64_t numel() const { return NumElements(shape); }
  size_t bytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  int64_t dim(size_t i) const { return shape.at(i); }
  int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
  int64_t row_elems() const { return shape.empty() ? 0 : numel() / shape[0]; }

  template <typename T>
  T* data() const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(buffer->data()) + offset);
  }
  // Rows [begin, begin + count) along dimension 0.
  DeviceTensor Rows(int64_t begin, int64_t count) const {
    Require(begin >= 0 && count >= 0 && begin + count <= rows(), ErrorCode::kInternal,
            "DeviceTensor::Rows out of range");
    DeviceTensor t = *this;
    t.offset += static_cast<size_t>(begin * row_elems()) * DTypeSize(dtype);
    t.shape[0] = count;
    return t;
  }
  // The same elements under another shape.
  DeviceTensor Reshape(Shape s) const {
    Require(NumElements(s) == numel(), ErrorCode::kInternal, "DeviceTensor::Reshape size");
    DeviceTensor t = *this;
    t.shape = std::move(s);
    return t;
  }
};

}  // namespace m3::engine::backend
