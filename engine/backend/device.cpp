// Device's default for quantized Linears: dequantize on the host, upload dense.
#include "engine/backend/device.h"

namespace m3::engine::backend {

LinearWeight Device::UploadQuantizedLinear(WeightFormat format,
                                           std::span<const QuantizedPart> parts, Shape shape) {
  const std::vector<float> dense = DequantizeParts(format, parts, shape);
  TensorView v;
  v.dtype = DType::kF32;
  v.shape = shape;
  v.data = reinterpret_cast<const uint8_t*>(dense.data());
  v.nbytes = dense.size() * sizeof(float);
  return LinearWeight(UploadWeight({&v, 1}, std::move(shape)));
}

}  // namespace m3::engine::backend
