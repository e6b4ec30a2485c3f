// EncoderOutput: one encoded image / video segment as a step's media spans refer to it (made by
// ModelRunner::Encode, held by the encoder cache, read by the runner's Execute). Below both the
// runtime, which only counts and shares it, and the backends, whose device tensor it wraps
// (engine/backend/device_encoder_output.h).
#pragma once

#include <cstdint>

namespace m3::engine {

// Merged vision features [tokens, hidden] held by the backend (host memory on the CPU, device
// memory on a GPU). Immutable once made, so the encoder cache may share it between requests and
// steps.
class EncoderOutput {
 public:
  virtual ~EncoderOutput() = default;
  virtual int64_t tokens() const = 0;  // feature rows = placeholder tokens of the segment
  virtual int64_t bytes() const = 0;   // memory held (encoder cache accounting)
};

}  // namespace m3::engine
