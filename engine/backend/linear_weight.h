// LinearWeight: an nn.Linear weight (or a stack of them: fused projections, stacked experts
// [E, N, K]) as a device holds it, in one of the formats checkpoints ship:
//  - kDense: w [..., N, K] in the device's weight_dtype();
//  - kMxfp8: w = e4m3 codes (kF8E4M3) [..., N, K], scales = e8m0 (kU8) [..., N, K / 32];
//  - kNvfp4: w = packed e2m1 (kU8) [..., N, K / 2], the even element in the low nibble,
//    scales = e4m3 (kF8E4M3) [..., N, K / 16], row_scale = float32 [..., N]: the global scale
//    (weight_scale_2) of the checkpoint tensor each row came from, so fused parts keep theirs.
// kernels/cpu/microscaling.h defines the arithmetic. Devices without kernels for a format
// dequantize at upload and hold kDense (the CPU backend: float32, the reference). The CUDA
// device keeps kMxfp8 / kNvfp4 in exactly this layout (no swizzle): its kernels
// (kernels/cuda/block_scaled_*.cuh) read codes, scales and row_scale as they are.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "engine/backend/device_tensor.h"

namespace m3::engine::backend {

enum class WeightFormat { kDense, kMxfp8, kNvfp4 };

inline std::string_view WeightFormatName(WeightFormat f) {
  switch (f) {
    case WeightFormat::kDense:
      return "dense";
    case WeightFormat::kMxfp8:
      return "MXFP8";
    case WeightFormat::kNvfp4:
      return "NVFP4";
  }
  return "?";
}

// Elements along K per scale.
inline int64_t WeightFormatBlock(WeightFormat f) {
  return f == WeightFormat::kMxfp8 ? 32 : f == WeightFormat::kNvfp4 ? 16 : 1;
}

struct LinearWeight {
  WeightFormat format = WeightFormat::kDense;
  DeviceTensor w;
  DeviceTensor scales;
  DeviceTensor row_scale;

  LinearWeight() = default;
  // A dense weight (implicit: every DeviceTensor weight is a dense Linear).
  LinearWeight(DeviceTensor dense) : w(std::move(dense)) {}  // NOLINT(google-explicit-constructor)

  explicit operator bool() const { return static_cast<bool>(w); }
  bool quantized() const { return format != WeightFormat::kDense; }
  // K: the input features.
  int64_t in_features() const {
    const int64_t last = w.dim(w.shape.size() - 1);
    return format == WeightFormat::kNvfp4 ? 2 * last : last;
  }
  // The dequantized shape [..., N, K].
  Shape shape() const {
    Shape s = w.shape;
    s.back() = in_features();
    return s;
  }
  int64_t numel() const { return NumElements(shape()); }
  // Bytes the device holds for it.
  size_t bytes() const {
    return w.bytes() + (scales ? scales.bytes() : 0) + (row_scale ? row_scale.bytes() : 0);
  }
};

}  // namespace m3::engine::backend
