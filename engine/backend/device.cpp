// Device's defaults for quantized Linears (dequantize on the host, upload dense) and dummy
// weights (drawn on the host, uploaded as a checkpoint's would be).
#include "engine/backend/device.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/cpu/microscaling.h"
#include "kernels/random_stream.h"

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

// Box-Muller over the counter-based stream: element i depends only on (seed, i).
std::vector<float> Normal(int64_t n, float mean, float std, uint64_t seed) {
  std::vector<float> out(static_cast<size_t>(n), mean);
  if (std == 0.0f) return out;
  for (int64_t i = 0; i < n; ++i) {
    const double u1 = 1.0 - kernels::CounterUniform(seed, 2 * static_cast<uint64_t>(i));
    const double u2 = kernels::CounterUniform(seed, 2 * static_cast<uint64_t>(i) + 1);
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    out[static_cast<size_t>(i)] = mean + std * static_cast<float>(z);
  }
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
  const std::vector<float> w = Normal(N * K, 0.0f, std, seed);
  const bool mx = format == WeightFormat::kMxfp8;
  std::vector<uint8_t> codes(static_cast<size_t>(mx ? N * K : N * K / 2));
  std::vector<uint8_t> scales(static_cast<size_t>(N * K / block));
  float amax = 0;
  for (float x : w) amax = std::max(amax, std::fabs(x));
  const float global = kernels::cpu::Nvfp4GlobalScale(amax);
  for (int64_t r = 0; r < N; ++r) {
    const float* row = w.data() + r * K;
    uint8_t* s = scales.data() + r * (K / block);
    if (mx)
      kernels::cpu::QuantizeMxfp8Row(row, K, codes.data() + r * K, s);
    else
      kernels::cpu::QuantizeNvfp4Row(row, K, global, codes.data() + r * K / 2, s);
  }
  QuantizedPart p;
  p.codes = {mx ? DType::kF8E4M3 : DType::kU8, {N, mx ? K : K / 2}, codes.data(), codes.size()};
  p.scales = {mx ? DType::kU8 : DType::kF8E4M3, {N, K / block}, scales.data(), scales.size()};
  p.global_scale = global;
  return UploadQuantizedLinear(format, {&p, 1}, std::move(shape));
}

}  // namespace m3::engine::backend
