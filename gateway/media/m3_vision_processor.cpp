// MiniMax-M3 VL preprocessing rules; see m3_vision_processor.h.
#include "gateway/media/m3_vision_processor.h"

#include <immintrin.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "gateway/media/cpu_features.h"
#include "gateway/media/smart_resize.h"
#include "shared/error.h"

namespace m3::media {

M3VisionProcessor::M3VisionProcessor(M3VisionConfig config) : config_(config) {
  CheckM3VisionConfig(config_, "vision processor");
  for (int c = 0; c < 3; ++c) {
    // The reference folds 1/255 into mean and std in float32, then computes (x - m) / s.
    const float m = static_cast<float>(config_.image_mean[c]) * 255.0f;
    const float s = static_cast<float>(config_.image_std[c]) * 255.0f;
    mean255_[c] = m;
    std255_[c] = s;
    for (int v = 0; v < 256; ++v) lut_[c][v] = (static_cast<float>(v) - m) / s;
  }
}

namespace {

// The largest frame a request may ask for through min_pixels / max_pixels, the same ceiling
// as a configured max_pixels. Without it a request's min_pixels = 2^40 would make the
// resampler allocate terabytes.
constexpr int64_t kMaxRequestPixels = M3VisionConfigBounds::kMaxPixels;

void CheckRequestPixels(const MediaOptions& options) {
  for (const auto& [value, name] :
       {std::pair{options.min_pixels, "min_pixels"}, std::pair{options.max_pixels, "max_pixels"}}) {
    Require(!value || *value <= kMaxRequestPixels, ErrorCode::kInvalidArgument,
            std::string(name) + " " + std::to_string(value.value_or(0)) +
                " is over the largest supported value, " + std::to_string(kMaxRequestPixels));
  }
}

}  // namespace

ResizeTarget M3VisionProcessor::ImageResize(int64_t height, int64_t width,
                                            const MediaOptions& options) const {
  CheckRequestPixels(options);
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
  // do_sample_frames false: every frame, as the reference, unless the request itself asks for
  // sampling parameters.
  const bool asks_sampling = options.fps || options.min_frames || options.max_frames;
  s.all_frames = options.all_frames || (!config_.video_sample_frames && !asks_sampling);
  Require(s.fps > 0 && std::isfinite(s.fps), ErrorCode::kInvalidArgument,
          "video fps must be positive");
  Require(s.min_frames >= 1 && s.max_frames >= s.min_frames, ErrorCode::kInvalidArgument,
          "video min_frames must be >= 1 and <= max_frames");
  return s;
}

ResizeTarget M3VisionProcessor::VideoResize(int64_t height, int64_t width, int64_t num_frames,
                                            const MediaOptions& options) const {
  CheckRequestPixels(options);
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
  const ResizeTarget t =
      SmartResize(height, width, config_.patch_size * config_.merge_size, min_pixels, max_pixels);
  // min_pixels wins over the shared budget, so many frames (all_frames, or a large max_frames
  // and fps) at min_pixels each could still ask for any amount of memory: the whole video may
  // not exceed the budget the reference spreads over its frames (by default 90 million
  // pixels, a 1 GB tensor) or, with no budget configured, the largest request frame.
  const int64_t budget =
      config_.temporal_patch_size *
      (config_.video_total_pixels > 0 ? config_.video_total_pixels : kMaxRequestPixels);
  const double total = static_cast<double>(std::max<int64_t>(num_frames, 1)) *
                       static_cast<double>(t.height) * static_cast<double>(t.width);
  Require(total <= static_cast<double>(budget), ErrorCode::kTooLarge,
          "video of " + std::to_string(num_frames) + " frames at " + std::to_string(t.width) + "x" +
              std::to_string(t.height) + " is over the total budget of " + std::to_string(budget) +
              " pixels (fewer frames or a smaller min_pixels)");
  return t;
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

namespace {

// Where one patch of one frame goes: `dst` points at the patch's (channel 0, first_slot)
// plane; planes of a patch are `plane` floats apart, channels `t * plane` apart.
struct PatchWrite {
  int64_t p, t, plane, first_slot, last_slot;
  int ch[3];
};

// Copies the first slot's planes into the later slots this frame fills (temporal padding).
void RepeatSlots(const PatchWrite& w, float* dst) {
  for (int c = 0; c < 3; ++c) {
    const float* from = dst + c * w.t * w.plane;
    for (int64_t slot = 1; slot <= w.last_slot - w.first_slot; ++slot) {
      std::memcpy(const_cast<float*>(from) + slot * w.plane, from, sizeof(float) * w.plane);
    }
  }
}

void PatchScalar(const PatchWrite& w, const float* const lut[3], const uint8_t* src, int64_t stride,
                 float* dst) {
  for (int c = 0; c < 3; ++c) {
    const float* l = lut[c];
    float* d = dst + c * w.t * w.plane;
    const uint8_t* s = src + w.ch[c];
    for (int64_t py = 0; py < w.p; ++py, s += stride, d += w.p) {
      for (int64_t x = 0; x < w.p; ++x) d[x] = l[s[3 * x]];
    }
  }
  RepeatSlots(w, dst);
}

// The frame's patch grid (in patches) and merge size, and the floats per output row.
struct PatchGrid {
  int64_t gh, gw, m, patch_dim;
};

// Copies a staged plane of `floats` (a multiple of 4) to 16-byte aligned `dst` with
// non-temporal stores: the output is megabytes written once, so writing around the cache
// saves reading every line in first.
__attribute__((target("avx2"))) void StreamPlane(const float* plane, int64_t floats, float* dst) {
  for (int64_t i = 0; i < floats; i += 4) _mm_stream_ps(dst + i, _mm_load_ps(plane + i));
}

// Patch rows of up to 16 pixels: the 48 bytes are split per channel with byte shuffles and
// normalized with the same float subtract and divide as the table (IEEE, so bit-identical).
// A patch's planes are staged in a small aligned buffer, then written to every temporal slot
// this frame fills (non-temporal stores where the layout keeps planes 16-byte aligned).
__attribute__((target("avx2"))) void FrameAvx2(const PatchWrite& w, const PatchGrid& g,
                                               const std::array<float, 3>& mean,
                                               const std::array<float, 3>& stdv,
                                               const ImageBuffer& frame, float* dst) {
  __m128i shuf[3][3];
  __m256 vmean[3], vstd[3];
  for (int c = 0; c < 3; ++c) {
    alignas(16) int8_t m[3][16];
    std::memset(m, -1, sizeof m);
    for (int i = 0; i < 16; ++i) {
      const int byte = 3 * i + w.ch[c];
      m[byte / 16][i] = static_cast<int8_t>(byte % 16);
    }
    for (int chunk = 0; chunk < 3; ++chunk) {
      shuf[c][chunk] = _mm_load_si128(reinterpret_cast<const __m128i*>(m[chunk]));
    }
    vmean[c] = _mm256_set1_ps(mean[c]);
    vstd[c] = _mm256_set1_ps(stdv[c]);
  }
  // One channel's plane per row of `stage`; each pixel row is stored as 16 floats, the extra
  // ones overwritten by the next row (or landing in the 16 floats of slack).
  alignas(32) float stage[3][16 * 16 + 16];
  const int64_t stride = frame.row_bytes();
  const int64_t p = w.p, m = g.m;
  const int64_t repeats = w.last_slot - w.first_slot;
  const bool streamed = w.plane % 4 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  for (int64_t hb = 0; hb < g.gh / m; ++hb) {
    for (int64_t wb = 0; wb < g.gw / m; ++wb) {
      for (int64_t mh = 0; mh < m; ++mh) {
        for (int64_t mw = 0; mw < m; ++mw, dst += g.patch_dim) {
          const uint8_t* src = frame.row((hb * m + mh) * p) + (wb * m + mw) * p * 3;
          for (int64_t py = 0; py < p; ++py, src += stride) {
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
            const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
            for (int c = 0; c < 3; ++c) {
              const __m128i v = _mm_or_si128(
                  _mm_or_si128(_mm_shuffle_epi8(a, shuf[c][0]), _mm_shuffle_epi8(b, shuf[c][1])),
                  _mm_shuffle_epi8(e, shuf[c][2]));
              const __m256 flo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
              const __m256 fhi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
              float* row = stage[c] + py * p;
              _mm256_storeu_ps(row, _mm256_div_ps(_mm256_sub_ps(flo, vmean[c]), vstd[c]));
              _mm256_storeu_ps(row + 8, _mm256_div_ps(_mm256_sub_ps(fhi, vmean[c]), vstd[c]));
            }
          }
          for (int c = 0; c < 3; ++c) {
            for (int64_t slot = 0; slot <= repeats; ++slot) {
              float* to = dst + c * w.t * w.plane + slot * w.plane;
              if (streamed) {
                StreamPlane(stage[c], w.plane, to);
              } else {
                std::memcpy(to, stage[c], sizeof(float) * w.plane);
              }
            }
          }
        }
      }
    }
  }
  // Non-temporal stores are weakly ordered: fence them before the tensor is handed on.
  _mm_sfence();
}

}  // namespace

void M3VisionProcessor::WriteFrame(const ImageBuffer& frame, int64_t index, int64_t count,
                                   float* out) const {
  const int64_t p = config_.patch_size, t = config_.temporal_patch_size, m = config_.merge_size;
  const PatchLayout layout = Layout(count, frame.height, frame.width);
  const int64_t gh = layout.grid_thw[1], gw = layout.grid_thw[2];
  const int64_t group = index / t;
  PatchWrite w{};
  w.p = p;
  w.t = t;
  w.plane = p * p;
  w.first_slot = index % t;
  // The last frame also fills the padding slots of its group (the reference repeats it).
  w.last_slot = index == count - 1 ? t - 1 : w.first_slot;
  for (int c = 0; c < 3; ++c) w.ch[c] = frame.ChannelIndex(c);
  // Patches in the output's row order (merge blocks, block-major), so every write is
  // contiguous within a patch and patches follow one another.
  float* dst = out + group * gh * gw * layout.patch_dim + w.first_slot * w.plane;
  const PatchGrid grid{gh, gw, m, layout.patch_dim};
  // The vector path reads 48 bytes per patch row: past the frame only into its padding.
  if (CpuHasAvx2() && p <= 16 && 3 * p + ImageBuffer::kPadding >= 48) {
    FrameAvx2(w, grid, mean255_, std255_, frame, dst);
    return;
  }
  const float* lut[3] = {lut_[0].data(), lut_[1].data(), lut_[2].data()};
  const int64_t stride = frame.row_bytes();
  for (int64_t hb = 0; hb < gh / m; ++hb) {
    for (int64_t wb = 0; wb < gw / m; ++wb) {
      for (int64_t mh = 0; mh < m; ++mh) {
        for (int64_t mw = 0; mw < m; ++mw, dst += layout.patch_dim) {
          PatchScalar(w, lut, frame.row((hb * m + mh) * p) + (wb * m + mw) * p * 3, stride, dst);
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

}  // namespace m3::media
