// MediaPreprocessor: encoded image/video bytes -> flat patch tensor, grid, timestamps and the
// prompt placeholder text. Owns decoding (libjpeg-turbo, OpenCV, FFmpeg; animated WebP videos
// through libwebpdemux), safety limits, frame sampling and antialiased resampling; everything
// model-specific is asked of the VisionProcessor.
// Thread-safe: all methods are const and share no mutable state.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/content/media_kind.h"
#include "gateway/media/media_options.h"
#include "gateway/media/vision_processor.h"
#include "shared/tensor.h"

namespace m3::media {

struct PreprocessedMedia {
  content::MediaKind kind = content::MediaKind::kImage;
  m3::HostTensor pixel_values;        // F32 [N, C*T*P*P]
  std::array<int64_t, 3> grid_thw{};  // in patches
  std::vector<double> timestamps;     // video: seconds of each sampled frame
  int64_t placeholder_tokens = 0;     // tokens this item occupies in the prompt
  std::string prompt_expansion;       // the placeholder text run (vision processor's)
};

// Called with an item's output size (resized pixels over all its frames, and the bytes of its
// pixel tensor) once they are known and before the pixels are decoded or the tensor is
// allocated; throws (an m3::Error) to refuse the item. This is where a caller enforces
// per-request and process-wide memory bounds.
using OutputCheck = std::function<void(int64_t pixels, int64_t tensor_bytes)>;

class MediaPreprocessor {
 public:
  MediaPreprocessor(std::shared_ptr<const VisionProcessor> processor, MediaLimits limits);

  // Errors (m3::Error): kInvalidArgument (not an image / corrupt / truncated), kUnsupported
  // (a recognised format this build cannot decode), kTooLarge (over a MediaLimits bound).
  PreprocessedMedia ProcessImage(std::string_view encoded_bytes, const MediaOptions& options,
                                 const OutputCheck& check = {}) const;
  PreprocessedMedia ProcessVideo(std::string_view encoded_bytes, const MediaOptions& options,
                                 const OutputCheck& check = {}) const;

  const VisionProcessor& processor() const { return *processor_; }
  const MediaLimits& limits() const { return limits_; }

 private:
  std::shared_ptr<const VisionProcessor> processor_;
  MediaLimits limits_;
};

}  // namespace m3::media
