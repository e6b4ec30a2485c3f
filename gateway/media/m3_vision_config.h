// M3VisionConfig: the MiniMax-M3 VL processor settings (patching, normalization, resize bounds,
// video sampling) and where they come from in a model directory: transformers 5's
// processor_config.json (sections "image_processor" and "video_processor") or the older
// preprocessor_config.json / video_preprocessor_config.json. Every value is checked when it
// is read, so a bad file fails at start with its name and key, never later as a huge
// allocation.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace m3::media {

struct M3VisionConfig {
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t merge_size = 2;
  std::array<double, 3> image_mean{0.48145466, 0.4578275, 0.40821073};
  std::array<double, 3> image_std{0.26862954, 0.26130258, 0.27577711};
  // Images.
  int64_t image_min_pixels = 4 * 28 * 28;
  int64_t image_max_pixels = 451584;
  // Videos.
  int64_t video_min_pixels = 4 * 28 * 28;
  int64_t video_max_pixels = 768 * 28 * 28;
  int64_t video_total_pixels = static_cast<int64_t>(64000 * 28 * 28 * 0.9);
  double video_fps = 1.0;
  int64_t video_min_frames = 4;
  int64_t video_max_frames = 768;
  // do_sample_frames: false makes the reference use every frame it is given; a request that
  // asks for fps or frame bounds still gets sampling.
  bool video_sample_frames = true;
};

// Sanity bounds on configured values (the released model: patch 14, temporal 2, merge 2).
struct M3VisionConfigBounds {
  static constexpr int64_t kMaxPatchSize = 128;
  static constexpr int64_t kMaxTemporalPatchSize = 16;
  static constexpr int64_t kMaxMergeSize = 16;
  // 16384 merged 28x28 tokens (Qwen2-VL's own ceiling): a 154 MB float tensor per frame.
  static constexpr int64_t kMaxPixels = 16384 * 28 * 28;
  // Qwen2.5-VL's largest documented video budget (128000 tokens of 28x28).
  static constexpr int64_t kMaxTotalPixels = 128000 * 28 * 28;
  static constexpr double kMaxFps = 1000.0;
  static constexpr int64_t kMaxFrames = 100000;
};

// Throws m3::Error(kInvalidArgument) naming `where` and the field when a value is outside the
// bounds or inconsistent (min over max, a non-positive std, ...).
void CheckM3VisionConfig(const M3VisionConfig& config, const std::string& where);

// Reads the processor settings of `model_dir`. processor_config.json's sections win over the
// separate files; keys a file leaves out keep the defaults above. Errors (m3::Error) name the
// file and key: kNotFound (unreadable file), kInvalidArgument (malformed JSON, a value of the
// wrong type or out of range, image and video settings that disagree on the patch layout),
// kUnsupported (do_resize/do_rescale/do_normalize false, a resample other than bicubic, a
// rescale_factor other than 1/255: this pipeline implements the reference's defaults only).
M3VisionConfig LoadM3VisionConfig(const std::string& model_dir);

}  // namespace m3::media
