// Tensor types shared by the gateway and the engine:
//  - TensorView: a non-owning typed view (dtype, shape, bytes), e.g. of an mmapped weight;
//  - HostTensor: an owning, contiguous host buffer with a dtype and shape, e.g. a
//    preprocessing output or a test input.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shared/default_init_allocator.h"
#include "shared/dtype.h"

namespace m3 {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);  // "[2, 3]"

struct TensorView {
  DType dtype = DType::kF32;
  Shape shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const { return NumElements(shape); }
  template <typename T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(data), nbytes / sizeof(T)};
  }
};

// Copies any float dtype (F32/F16/BF16/F64) to float32; integer dtypes are an error.
std::vector<float> ToFloat32(const TensorView& view, const std::string& name);
// Copies any integer dtype (I64/I32/I16/I8/U8/BOOL) to int64; float dtypes are an error.
std::vector<int64_t> ToInt64(const TensorView& view, const std::string& name);

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);  // zero-filled
  // For outputs a kernel writes completely: the bytes start uninitialized.
  static HostTensor Uninitialized(DType dtype, Shape shape);
  static HostTensor FromFloat(Shape shape, std::vector<float> values);
  static HostTensor FromInt64(Shape shape, const std::vector<int64_t>& values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return NumElements(shape_); }
  size_t nbytes() const { return bytes_.size(); }
  uint8_t* data() { return bytes_.data(); }
  const uint8_t* data() const { return bytes_.data(); }
  template <typename T>
  std::span<T> as() {
    return {reinterpret_cast<T*>(bytes_.data()), bytes_.size() / sizeof(T)};
  }
  template <typename T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(bytes_.data()), bytes_.size() / sizeof(T)};
  }
  TensorView view() const { return {dtype_, shape_, bytes_.data(), bytes_.size()}; }

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::vector<uint8_t, DefaultInitAllocator<uint8_t>> bytes_;
};

}  // namespace m3
