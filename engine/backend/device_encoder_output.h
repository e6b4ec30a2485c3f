// DeviceEncoderOutput: the EncoderOutput every backend-based runner returns, its merged vision
// features as a DeviceTensor [tokens, hidden] that Execute copies into placeholder rows.
#pragma once

#include "engine/backend/device_tensor.h"
#include "engine/step/encoder_output.h"

namespace m3::engine::backend {

class DeviceEncoderOutput final : public EncoderOutput {
 public:
  explicit DeviceEncoderOutput(DeviceTensor features) : features_(std::move(features)) {}
  int64_t tokens() const override { return features_.rows(); }
  int64_t bytes() const override { return static_cast<int64_t>(features_.bytes()); }
  const DeviceTensor& features() const { return features_; }

 private:
  DeviceTensor features_;
};

}  // namespace m3::engine::backend
