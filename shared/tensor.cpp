// Shape helpers, dtype conversions of views, and HostTensor construction.
#include "shared/tensor.h"

#include <cstring>

#include "shared/error.h"

namespace m3 {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

template <typename From, typename To, typename Convert>
std::vector<To> ConvertAll(const TensorView& v, Convert convert) {
  size_t n = static_cast<size_t>(v.numel());
  std::vector<To> out(n);
  const uint8_t* p = v.data;
  for (size_t i = 0; i < n; ++i) {
    From x;
    std::memcpy(&x, p + i * sizeof(From), sizeof(From));  // views may be unaligned (mmap)
    out[i] = convert(x);
  }
  return out;
}

}  // namespace

std::vector<float> ToFloat32(const TensorView& v, const std::string& name) {
  switch (v.dtype) {
    case DType::kF32:
      return ConvertAll<float, float>(v, [](float x) { return x; });
    case DType::kF64:
      return ConvertAll<double, float>(v, [](double x) { return float(x); });
    case DType::kBF16:
      return ConvertAll<uint16_t, float>(v, BF16ToF32);
    case DType::kF16:
      return ConvertAll<uint16_t, float>(v, F16ToF32);
    default:
      throw Error(ErrorCode::kInvalidArgument, "tensor '" + name + "' has dtype " +
                                                   std::string(DTypeName(v.dtype)) +
                                                   ", expected a float type (F32, F16, BF16)");
  }
}

std::vector<int64_t> ToInt64(const TensorView& v, const std::string& name) {
  switch (v.dtype) {
    case DType::kI64:
      return ConvertAll<int64_t, int64_t>(v, [](int64_t x) { return x; });
    case DType::kI32:
      return ConvertAll<int32_t, int64_t>(v, [](int32_t x) { return x; });
    case DType::kI16:
      return ConvertAll<int16_t, int64_t>(v, [](int16_t x) { return x; });
    case DType::kI8:
      return ConvertAll<int8_t, int64_t>(v, [](int8_t x) { return x; });
    case DType::kU8:
    case DType::kBool:
      return ConvertAll<uint8_t, int64_t>(v, [](uint8_t x) { return x; });
    default:
      throw Error(ErrorCode::kInvalidArgument, "tensor '" + name + "' has dtype " +
                                                   std::string(DTypeName(v.dtype)) +
                                                   ", expected an integer type (I64, I32)");
  }
}

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype),
      shape_(std::move(shape)),
      bytes_(static_cast<size_t>(NumElements(shape_)) * DTypeSize(dtype), 0) {}

HostTensor HostTensor::Uninitialized(DType dtype, Shape shape) {
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.bytes_.resize(static_cast<size_t>(NumElements(t.shape_)) * DTypeSize(dtype));
  return t;
}

HostTensor HostTensor::FromFloat(Shape shape, std::vector<float> values) {
  HostTensor t(DType::kF32, std::move(shape));
  Require(values.size() == static_cast<size_t>(t.numel()), ErrorCode::kInternal,
          "HostTensor::FromFloat: value count does not match shape " + ShapeString(t.shape_));
  std::memcpy(t.data(), values.data(), t.nbytes());
  return t;
}

HostTensor HostTensor::FromInt64(Shape shape, const std::vector<int64_t>& values) {
  HostTensor t(DType::kI64, std::move(shape));
  Require(values.size() == static_cast<size_t>(t.numel()), ErrorCode::kInternal,
          "HostTensor::FromInt64: value count does not match shape " + ShapeString(t.shape_));
  std::memcpy(t.data(), values.data(), t.nbytes());
  return t;
}

}  // namespace m3
