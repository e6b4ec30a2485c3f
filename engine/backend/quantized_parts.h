// QuantizedPart: the host side of one source tensor of a block-scaled Linear (an mmapped view
// of its codes and of its scales, or a slice of them), as the weight uploader hands them to a
// Device; DequantizeParts turns parts into float32, what devices without kernels for the format
// hold (the CPU backend, the reference the GPU kernels are tested against).
#pragma once

#include <span>
#include <vector>

#include "engine/backend/linear_weight.h"
#include "shared/tensor.h"

namespace m3::engine::backend {

struct QuantizedPart {
  TensorView codes;   // kMxfp8: F8_E4M3 [rows, K]; kNvfp4: U8 [rows, K / 2]
  TensorView scales;  // kMxfp8: U8 (or F8_E8M0) [rows, K / 32]; kNvfp4: F8_E4M3 [rows, K / 16]
  float global_scale = 1.0f;  // kNvfp4: the tensor's weight_scale_2
};

// Checks that `parts` fill `shape` (the dequantized [..., N, K], parts concatenated along
// dimension 0) with codes and scales of the format's dtypes and widths; kInternal otherwise
// (the loader has checked the checkpoint's tensors by then).
void CheckQuantizedParts(WeightFormat format, std::span<const QuantizedPart> parts,
                         const Shape& shape);

// The parts dequantized to float32, [NumElements(shape)] row-major.
std::vector<float> DequantizeParts(WeightFormat format, std::span<const QuantizedPart> parts,
                                   const Shape& shape);

}  // namespace m3::engine::backend
