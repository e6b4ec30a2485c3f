// VideoDecoder: FFmpeg demuxing and decoding of a video held in memory (a custom AVIOContext
// over the bytes, seekable). Reads the container header first so duration, frame-count and
// size limits are enforced before any frame is decoded; then delivers RGB frames, with the
// display-matrix rotation applied, at requested presentation times, decoding only what
// those frames need (non-reference frames that cover no requested time are discarded, and
// long gaps between requested times are crossed by seeking to the preceding keyframe).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gateway/media/image_buffer.h"
#include "gateway/media/media_options.h"

namespace m3::media {

struct VideoInfo {
  int64_t width = 0;  // as displayed (after rotation)
  int64_t height = 0;
  int rotation = 0;         // clockwise degrees applied to decoded frames: 0, 90, 180, 270
  double duration = 0;      // seconds
  double fps = 0;           // average frame rate
  int64_t frame_count = 0;  // from the container, or estimated from duration x fps
  std::string codec;
};

class VideoDecoder {
 public:
  // Opens the container and the best video stream. Throws kInvalidArgument (not a video,
  // corrupt), kUnsupported (no decoder for the codec), kTooLarge (over `limits`).
  VideoDecoder(std::string_view bytes, const MediaLimits& limits);
  ~VideoDecoder();
  VideoDecoder(const VideoDecoder&) = delete;
  VideoDecoder& operator=(const VideoDecoder&) = delete;

  const VideoInfo& info() const;

  // Called with a decoded frame (RGB, rotated), the index of the requested time it serves
  // and the frame's timestamp in seconds from the stream start. Return false to stop.
  using FrameSink = std::function<bool(const ImageBuffer& frame, int64_t target, double seconds)>;

  // `times`: ascending seconds from the stream start; each is served by the frame shown at
  // that time (the frame whose display interval contains it, or the next frame after a gap).
  // Empty `times` = every frame (target = frame number). Returns the number of sink calls.
  // Throws kTooLarge when the frames to deliver add up to more than 128 frames of the largest
  // size `limits` allow (checked before decoding, and again as frames arrive).
  int64_t Decode(std::span<const double> times, const FrameSink& sink);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace m3::media
