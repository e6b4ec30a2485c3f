// M3VisionProcessor: MiniMax-M3 VL's image and video preprocessing rules (the HF
// MiniMaxM3VLImageProcessor / MiniMaxM3VLVideoProcessor / MiniMaxM3VLProcessor): smart
// resize to multiples of 28, CLIP normalization, 14x14 patches with temporal size 2 grouped
// block-major over 2x2 merge blocks, and the ]<]...[>[ placeholder text with per-group video
// timestamps.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "gateway/media/m3_vision_config.h"
#include "gateway/media/vision_processor.h"

namespace m3::media {

class M3VisionProcessor : public VisionProcessor {
 public:
  explicit M3VisionProcessor(M3VisionConfig config);

  std::string_view name() const override { return "minimax_m3_vl"; }
  ResizeTarget ImageResize(int64_t height, int64_t width,
                           const MediaOptions& options) const override;
  FrameSampling VideoSampling(const MediaOptions& options) const override;
  ResizeTarget VideoResize(int64_t height, int64_t width, int64_t num_frames,
                           const MediaOptions& options) const override;
  PatchLayout Layout(int64_t frames, int64_t height, int64_t width) const override;
  void WriteFrame(const ImageBuffer& frame, int64_t index, int64_t count,
                  float* out) const override;
  int64_t PlaceholderTokens(const std::array<int64_t, 3>& grid_thw) const override;
  std::string ImagePrompt(const std::array<int64_t, 3>& grid_thw) const override;
  std::string VideoPrompt(const std::array<int64_t, 3>& grid_thw,
                          std::span<const double> timestamps) const override;

  const M3VisionConfig& config() const { return config_; }

  static constexpr std::string_view kImageToken = "]<]image[>[";
  static constexpr std::string_view kVideoToken = "]<]video[>[";
  static constexpr std::string_view kVisionStart = "]<]start of image[>[";
  static constexpr std::string_view kVisionEnd = "]<]end of image[>[";

 private:
  M3VisionConfig config_;
  // The reference's normalization (x - mean255) / std255 in float32, per RGB channel: as a
  // table for the scalar path, as the two constants for the vector path (same IEEE ops).
  std::array<std::array<float, 256>, 3> lut_;
  std::array<float, 3> mean255_{}, std255_{};
};

}  // namespace m3::media
