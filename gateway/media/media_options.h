// Per-request media options (resize bounds, video sampling) and the gateway's safety limits
// for decoding untrusted media. Both are plain data shared by the pipeline and the vision
// processors.
#pragma once

#include <cstdint>
#include <optional>

namespace m3::media {

// Per-request overrides; an unset field means "the vision processor's default".
struct MediaOptions {
  std::optional<int64_t> min_pixels, max_pixels;
  std::optional<double> fps;  // video sampling rate (frames per second of video)
  bool all_frames = false;    // video: no sampling, every decoded frame
  std::optional<int64_t> min_frames, max_frames;
};

// Safety limits, checked as early as possible (image headers before decoding, video
// container headers before decoding frames).
struct MediaLimits {
  int64_t max_image_pixels = 178956970 / 2;  // decompression-bomb guard (PIL's default)
  int64_t max_encoded_bytes = int64_t{1} << 31;
  double max_video_seconds = 3 * 3600;
  int64_t max_video_frames_decoded = 100000;
  int64_t max_video_pixels_per_frame = 8192LL * 8192;  // per decoded frame
  int decoder_threads = 0;  // FFmpeg codec threads per video; 0 = FFmpeg's choice (one per core)
  // Opt-in speed/accuracy trade: decode JPEGs at 1/2, 1/4 or 1/8 scale in the DCT domain when
  // the result still covers the resize target (like PIL's Image.draft), then resample as usual.
  // Not bit-exact with the reference (tests/media/jpeg_decoder_test.cpp checks its error bound).
  bool jpeg_draft = false;
};

}  // namespace m3::media
