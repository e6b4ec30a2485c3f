// Device's defaults for quantized Linears (dequantize on the host, upload dense) and dummy
// weights (drawn on the host by the GPU fills' CPU twin, uploaded as a checkpoint's would be).
#include "engine/backend/device.h"

#include <string>

#include "kernels/cpu/random_fill.h"
#include "shared/error.h"

namespace m3::engine::backend {

namespace {

TensorView F32View(const std::vector<float>& v, const Shape& shape) {
  TensorView t;
  t.dtype = DType::kF32;
  t.shape = shape;
  t.data = reinterpret_cast<const uint8_t*>(v.data());
  t.nbytes = v.size() * sizeof(float);
  return t;
}

// kernels/cpu/random_fill.h's draws: the numbers GPU devices draw in place, so a dummy model is
// the same model on the CPU (float32) and on a GPU (bf16 of the same values).
std::vector<float> Normal(int64_t n, float mean, float std, uint64_t seed) {
  std::vector<float> out(static_cast<size_t>(n));
  kernels::cpu::RandomNormal(seed, mean, std, 0, n, out.data());
  return out;
}

}  // namespace

LinearWeight Device::UploadQuantizedLinear(WeightFormat format,
                                           std::span<const QuantizedPart> parts, Shape shape) {
  const std::vector<float> dense = DequantizeParts(format, parts, shape);
  const TensorView v = F32View(dense, shape);
  return LinearWeight(UploadWeight({&v, 1}, std::move(shape)));
}

DeviceTensor Device::DummyWeight(Shape shape, float mean, float std, uint64_t seed) {
  const std::vector<float> host = Normal(NumElements(shape), mean, std, seed);
  const TensorView v = F32View(host, shape);
  return UploadWeight({&v, 1}, std::move(shape));
}

LinearWeight Device::DummyLinear(WeightFormat format, Shape shape, float std, uint64_t seed) {
  if (format == WeightFormat::kDense)
    return LinearWeight(DummyWeight(std::move(shape), 0, std, seed));
  const int64_t K = shape.back(), N = NumElements(shape) / K, block = WeightFormatBlock(format);
  Require(shape.size() >= 2 && K > 0 && K % block == 0, ErrorCode::kInternal,
          "DummyLinear: a " + std::string(WeightFormatName(format)) +
              " Linear needs K a multiple of " + std::to_string(block));
  const bool mx = format == WeightFormat::kMxfp8;
  std::vector<uint8_t> codes(static_cast<size_t>(mx ? N * K : N * K / 2));
  std::vector<uint8_t> scales(static_cast<size_t>(N * K / block));
  const float global = mx ? 1.0f : kernels::cpu::DummyNvfp4GlobalScale(std);
  if (mx)
    kernels::cpu::RandomMxfp8Rows(seed, std, K, 0, N, codes.data(), scales.data());
  else
    kernels::cpu::RandomNvfp4Rows(seed, std, global, K, 0, N, codes.data(), scales.data());
  QuantizedPart p;
  p.codes = {mx ? DType::kF8E4M3 : DType::kU8, {N, mx ? K : K / 2}, codes.data(), codes.size()};
  p.scales = {mx ? DType::kU8 : DType::kF8E4M3, {N, K / block}, scales.data(), scales.size()};
  p.global_scale = global;
  return UploadQuantizedLinear(format, {&p, 1}, std::move(shape));
}

}  // namespace m3::engine::backend
