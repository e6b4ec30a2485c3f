// LinearLayout: how a checkpoint stores one nn.Linear weight, read from its tensors alone
// (a Linear is what its tensors say it is):
//  - dense: `X.weight` of a float dtype (F32 / BF16 / F16 / F64) [N, K];
//  - MXFP8: `X.weight` F8_E4M3 [N, K] with `X.weight_scale_inv` (MiniMax) or `X.weight_scale`
//    (ModelOpt), U8 or F8_E8M0 [N, K / 32];
//  - NVFP4: `X.weight` U8 [N, K / 2] with `X.weight_scale` F8_E4M3 [N, K / 16] and
//    `X.weight_scale_2` a float32 scalar (`X.input_scale` is for W4A4 kernels and unused).
// Anything else (F8_E5M2, I8, U8 without its scales, a scale of the wrong shape or dtype) is
// kInvalidArgument naming the tensor. ValidateCheckpoint checks every weight of a checkpoint
// that way before anything is uploaded, and against the quantization config where it names a
// format.
#pragma once

#include <functional>
#include <string>

#include "engine/backend/linear_weight.h"
#include "engine/backend/quant_config.h"
#include "shared/safetensors.h"

namespace m3::engine::backend {

struct LinearLayout {
  WeightFormat format = WeightFormat::kDense;
  TensorView weight;  // dense values or codes
  TensorView scales;  // quantized: the block scales
  std::string scale_name;
  TensorView global;  // NVFP4: weight_scale_2
  float global_scale = 1.0f;
  // The dequantized shape [N, K].
  Shape shape() const;
};

// The layout of `name` ("X.weight"): kNotFound when missing; kInvalidArgument naming the tensor
// when it is no layout above, or (with `expected`, the dequantized shape config.json implies)
// when its shape differs.
LinearLayout DetectLinearLayout(const WeightStore& store, const std::string& name,
                                const Shape* expected = nullptr);

// Every `*.weight` of the checkpoint (those `skip` says are not loaded aside) is a float tensor
// or one of the quantized layouts, and a quantized one has the format `quant` gives its module
// where that is quantized; kInvalidArgument naming the first that is not. Quantized tensors
// where the config says dense are logged (one line with the count), not refused.
void ValidateCheckpoint(const WeightStore& store, const QuantConfig& quant,
                        const std::function<bool(const std::string&)>& skip = {});

}  // namespace m3::engine::backend
