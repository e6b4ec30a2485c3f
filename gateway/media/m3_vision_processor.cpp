// MiniMax-M3 VL preprocessing rules; see m3_vision_processor.h.
#include "gateway/media/m3_vision_processor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "gateway/media/smart_resize.h"
#include "shared/error.h"

namespace m3::media {

M3VisionProcessor::M3VisionProcessor(M3VisionConfig config) : config_(config) {
  Require(config_.patch_size > 0 && config_.temporal_patch_size > 0 && config_.merge_size > 0,
          ErrorCode::kInvalidArgument, "vision processor: patch sizes must be positive");
  for (int c = 0; c < 3; ++c) {
    Require(config_.image_std[c] > 0, ErrorCode::kInvalidArgument,
            "vision processor: image_std must be positive");
    // The reference folds 1/255 into mean and std in float32, then computes (x - m) / s.
    const float m = static_cast<float>(config_.image_mean[c]) * 255.0f;
    const float s = static_cast<float>(config_.image_std[c]) * 255.0f;
    for (int v = 0; v < 256; ++v) lut_[c][v] = (static_cast<float>(v) - m) / s;
  }
}

ResizeTarget M3VisionProcessor::ImageResize(int64_t height, int64_t width,
                                            const MediaOptions& options) const {
  const int64_t min_pixels = options.min_pixels.value_or(config_.image_min_pixels);
  const int64_t max_pixels = options.max_pixels.value_or(config_.image_max_pixels);
  Require(min_pixels > 0 && max_pixels >= min_pixels, ErrorCode::kInvalidArgument,
          "min_pixels must be positive and at most max_pixels");
  return SmartResize(height, width, config_.patch_size * config_.merge_size, min_pixels,
                     max_pixels);
}

FrameSampling M3VisionProcessor::VideoSampling(const MediaOptions& options) const {
  FrameSampling s;
  s.fps = options.fps.value_or(config_.video_fps);
  s.min_frames = options.min_frames.value_or(config_.video_min_frames);
  s.max_frames = options.max_frames.value_or(config_.video_max_frames);
  s.all_frames = options.all_frames;
  Require(s.fps > 0 && std::isfinite(s.fps), ErrorCode::kInvalidArgument,
          "video fps must be positive");
  Require(s.min_frames >= 1 && s.max_frames >= s.min_frames, ErrorCode::kInvalidArgument,
          "video min_frames must be >= 1 and <= max_frames");
  return s;
}

ResizeTarget M3VisionProcessor::VideoResize(int64_t height, int64_t width, int64_t num_frames,
                                            const MediaOptions& options) const {
  const int64_t min_pixels = options.min_pixels.value_or(config_.video_min_pixels);
  int64_t max_pixels = options.max_pixels.value_or(config_.video_max_pixels);
  Require(min_pixels > 0 && max_pixels >= min_pixels, ErrorCode::kInvalidArgument,
          "min_pixels must be positive and at most max_pixels");
  // The total budget is shared by the frames; two frames share one temporal patch.
  if (num_frames > 0 && config_.video_total_pixels > 0) {
    const double per_frame = static_cast<double>(config_.video_total_pixels) /
                             static_cast<double>(num_frames) *
                             static_cast<double>(config_.temporal_patch_size);
    max_pixels = std::max(min_pixels, std::min(max_pixels, static_cast<int64_t>(per_frame)));
  }
  return SmartResize(height, width, config_.patch_size * config_.merge_size, min_pixels,
                     max_pixels);
}

PatchLayout M3VisionProcessor::Layout(int64_t frames, int64_t height, int64_t width) const {
  const int64_t p = config_.patch_size, t = config_.temporal_patch_size, m = config_.merge_size;
  Require(frames >= 1 && height % (p * m) == 0 && width % (p * m) == 0 && height > 0 && width > 0,
          ErrorCode::kInternal,
          "vision processor: frame size is not a multiple of the merge block");
  PatchLayout layout;
  layout.grid_thw = {(frames + t - 1) / t, height / p, width / p};
  layout.rows = layout.grid_thw[0] * layout.grid_thw[1] * layout.grid_thw[2];
  layout.patch_dim = 3 * t * p * p;
  return layout;
}

void M3VisionProcessor::WriteFrame(const ImageBuffer& frame, int64_t index, int64_t count,
                                   float* out) const {
  const int64_t p = config_.patch_size, t = config_.temporal_patch_size, m = config_.merge_size;
  const PatchLayout layout = Layout(count, frame.height, frame.width);
  const int64_t gh = layout.grid_thw[1], gw = layout.grid_thw[2];
  const int64_t group = index / t;
  const int64_t first_slot = index % t;
  // The last frame also fills the padding slots of its group (the reference repeats it).
  const int64_t last_slot = index == count - 1 ? t - 1 : first_slot;
  const int64_t plane = p * p;  // one (channel, slot) block of a patch
  float* dst = out + group * gh * gw * layout.patch_dim;
  const float* lut[3] = {lut_[0].data(), lut_[1].data(), lut_[2].data()};
  const int ch[3] = {frame.ChannelIndex(0), frame.ChannelIndex(1), frame.ChannelIndex(2)};
  // One patch at a time, in the output's row order: its three channel planes are gathered
  // into `planes` (L1-resident), then written out contiguously for each of this frame's slots.
  std::vector<float> planes(static_cast<size_t>(3 * plane));
  float* const pl[3] = {planes.data(), planes.data() + plane, planes.data() + 2 * plane};
  const int64_t stride = frame.row_bytes();
  for (int64_t hb = 0; hb < gh / m; ++hb) {
    for (int64_t wb = 0; wb < gw / m; ++wb) {
      for (int64_t mh = 0; mh < m; ++mh) {
        for (int64_t mw = 0; mw < m; ++mw, dst += layout.patch_dim) {
          const uint8_t* src = frame.row((hb * m + mh) * p) + (wb * m + mw) * p * 3;
          float *d0 = pl[0], *d1 = pl[1], *d2 = pl[2];
          for (int64_t py = 0; py < p; ++py, src += stride, d0 += p, d1 += p, d2 += p) {
            const uint8_t* s0 = src + ch[0];
            const uint8_t* s1 = src + ch[1];
            const uint8_t* s2 = src + ch[2];
            for (int64_t x = 0; x < p; ++x) {
              d0[x] = lut[0][s0[3 * x]];
              d1[x] = lut[1][s1[3 * x]];
              d2[x] = lut[2][s2[3 * x]];
            }
          }
          for (int c = 0; c < 3; ++c) {
            for (int64_t slot = first_slot; slot <= last_slot; ++slot) {
              std::memcpy(dst + (c * t + slot) * plane, pl[c], sizeof(float) * plane);
            }
          }
        }
      }
    }
  }
}

int64_t M3VisionProcessor::PlaceholderTokens(const std::array<int64_t, 3>& g) const {
  return g[0] * g[1] * g[2] / (config_.merge_size * config_.merge_size);
}

std::string M3VisionProcessor::ImagePrompt(const std::array<int64_t, 3>& g) const {
  const int64_t n = PlaceholderTokens(g);
  std::string s;
  s.reserve(kVisionStart.size() + kVisionEnd.size() + n * kImageToken.size());
  s += kVisionStart;
  for (int64_t i = 0; i < n; ++i) s += kImageToken;
  s += kVisionEnd;
  return s;
}

std::string M3VisionProcessor::VideoPrompt(const std::array<int64_t, 3>& g,
                                           std::span<const double> timestamps) const {
  const int64_t per_group = g[1] * g[2] / (config_.merge_size * config_.merge_size);
  std::string s;
  for (int64_t group = 0; group < g[0]; ++group) {
    if (!timestamps.empty()) {
      // The timestamp of a temporal group is that of its first frame.
      const size_t i = std::min<size_t>(group * config_.temporal_patch_size, timestamps.size() - 1);
      char buf[64];
      std::snprintf(buf, sizeof buf, "]<]%.1f seconds[>[", timestamps[i]);
      s += buf;
    }
    s += kVisionStart;
    for (int64_t i = 0; i < per_group; ++i) s += kVideoToken;
    s += kVisionEnd;
  }
  return s;
}

namespace {

std::optional<nlohmann::json> ReadJson(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::ifstream in(path);
  Require(in.good(), ErrorCode::kNotFound, "cannot read " + path.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, path.string() + ": invalid JSON: " + e.what());
  }
}

template <typename T>
void Take(const nlohmann::json& j, const char* key, T& value) {
  if (j.contains(key) && !j[key].is_null()) value = j[key].get<T>();
}

void TakeCommon(const nlohmann::json& j, M3VisionConfig& c) {
  Take(j, "patch_size", c.patch_size);
  Take(j, "temporal_patch_size", c.temporal_patch_size);
  Take(j, "merge_size", c.merge_size);
  if (j.contains("image_mean") && j["image_mean"].is_array() && j["image_mean"].size() == 3) {
    c.image_mean = j["image_mean"].get<std::array<double, 3>>();
  }
  if (j.contains("image_std") && j["image_std"].is_array() && j["image_std"].size() == 3) {
    c.image_std = j["image_std"].get<std::array<double, 3>>();
  }
}

}  // namespace

M3VisionConfig LoadM3VisionConfig(const std::string& model_dir) {
  M3VisionConfig c;
  const std::filesystem::path dir(model_dir);
  try {
    if (auto j = ReadJson(dir / "preprocessor_config.json")) {
      TakeCommon(*j, c);
      // Like the reference: "size" {shortest_edge, longest_edge} unless it is the stale
      // [672, 672] of early checkpoints; explicit min/max_pixels win.
      if (j->contains("size") && (*j)["size"].is_object()) {
        Take((*j)["size"], "shortest_edge", c.image_min_pixels);
        Take((*j)["size"], "longest_edge", c.image_max_pixels);
      }
      Take(*j, "min_pixels", c.image_min_pixels);
      Take(*j, "max_pixels", c.image_max_pixels);
    }
    if (auto j = ReadJson(dir / "video_preprocessor_config.json")) {
      TakeCommon(*j, c);
      Take(*j, "min_pixels", c.video_min_pixels);
      Take(*j, "max_pixels", c.video_max_pixels);
      Take(*j, "total_pixels", c.video_total_pixels);
      Take(*j, "fps", c.video_fps);
      Take(*j, "min_frames", c.video_min_frames);
      Take(*j, "max_frames", c.video_max_frames);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument,
                model_dir + ": bad preprocessor config value: " + e.what());
  }
  return c;
}

}  // namespace m3::media
