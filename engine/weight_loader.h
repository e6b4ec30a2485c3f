// Loads named weights from a WeightStore as float32 (bf16 / f16 / f64 converted) after checking
// each one's dtype and shape against what the config implies, so a mismatched checkpoint fails
// at load with the tensor's name instead of producing wrong numbers later.
#pragma once

#include <string>
#include <vector>

#include "shared/safetensors.h"
#include "shared/tensor.h"

namespace m3::engine {

class WeightLoader {
 public:
  explicit WeightLoader(const WeightStore& store) : store_(store) {}

  // Throws kNotFound when missing, kInvalidArgument on a non-float dtype or a shape other
  // than `expected`.
  std::vector<float> Load(const std::string& name, const Shape& expected) const;

 private:
  const WeightStore& store_;
};

}  // namespace m3::engine
