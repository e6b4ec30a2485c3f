// VisionProcessor: the model-specific half of media preprocessing. The pipeline
// (MediaPreprocessor: decoding, frame sampling, resampling, threads) asks it what size to
// resize to, how to sample video frames, how resized frames are laid out as flat patches,
// and what placeholder text an item expands to in the prompt. A second model is a second
// implementation of this interface, not an edited pipeline.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gateway/media/image_buffer.h"
#include "gateway/media/media_options.h"

namespace m3::media {

struct ResizeTarget {
  int64_t height = 0;
  int64_t width = 0;
};

// How a video's frames are chosen: `fps` frames per second of video, clamped to
// [min_frames, max_frames] (and to the frames that exist), or every frame.
struct FrameSampling {
  double fps = 1.0;
  int64_t min_frames = 1;
  int64_t max_frames = 1 << 30;
  bool all_frames = false;
};

// Shape of the flat patch tensor [rows, patch_dim] for `frames` frames of height x width.
struct PatchLayout {
  std::array<int64_t, 3> grid_thw{};  // in patches
  int64_t rows = 0;
  int64_t patch_dim = 0;
};

class VisionProcessor {
 public:
  virtual ~VisionProcessor() = default;
  virtual std::string_view name() const = 0;

  // Size an image of height x width is resized to; throws kInvalidArgument for shapes the
  // model refuses (e.g. extreme aspect ratios).
  virtual ResizeTarget ImageResize(int64_t height, int64_t width,
                                   const MediaOptions& options) const = 0;
  virtual FrameSampling VideoSampling(const MediaOptions& options) const = 0;
  // Size every frame of a `num_frames`-frame video of height x width is resized to (a total
  // pixel budget may shrink frames of long videos).
  virtual ResizeTarget VideoResize(int64_t height, int64_t width, int64_t num_frames,
                                   const MediaOptions& options) const = 0;

  // Layout for `frames` resized frames (1 for an image).
  virtual PatchLayout Layout(int64_t frames, int64_t height, int64_t width) const = 0;
  // Normalizes resized frame `index` of `count` and writes it into `out` (the flat tensor of
  // Layout(count, ...)), including any temporal padding that repeats it. Frames are
  // independent, so callers may write them from several threads.
  virtual void WriteFrame(const ImageBuffer& frame, int64_t index, int64_t count,
                          float* out) const = 0;

  // Placeholder tokens an item of this grid occupies in the prompt.
  virtual int64_t PlaceholderTokens(const std::array<int64_t, 3>& grid_thw) const = 0;
  virtual std::string ImagePrompt(const std::array<int64_t, 3>& grid_thw) const = 0;
  // `timestamps`: seconds of each sampled frame (may be empty when unknown).
  virtual std::string VideoPrompt(const std::array<int64_t, 3>& grid_thw,
                                  std::span<const double> timestamps) const = 0;
};

// The processor for a model directory, configured from its processor settings
// (processor_config.json, else preprocessor_config.json / video_preprocessor_config.json; keys
// they leave out keep the model family's defaults). An empty `model_dir` gives the defaults.
// Throws m3::Error at once for a directory that does not exist or holds no model files, and
// for settings that are malformed, out of range or disagree with config.json's vision tower
// (the message names the file and key).
std::shared_ptr<const VisionProcessor> LoadVisionProcessor(const std::string& model_dir);

}  // namespace m3::media
