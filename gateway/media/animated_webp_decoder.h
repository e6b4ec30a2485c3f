// AnimatedWebpDecoder: animated WebP as a video, through libwebp's demux library
// (WebPAnimDecoder), since Debian's FFmpeg 5.1 cannot decode animated WebP. Frames are
// composited on the canvas (as the format defines), alpha dropped, and delivered at requested
// times with the same semantics as VideoDecoder, so sampling and patchify are shared.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "gateway/media/media_options.h"
#include "gateway/media/video_decoder.h"

namespace m3::media {

class AnimatedWebpDecoder {
 public:
  // Parses the container (no frame decoded yet) and checks canvas size, duration and frame
  // count against `limits`. Throws kInvalidArgument (not an animated WebP, corrupt),
  // kTooLarge.
  AnimatedWebpDecoder(std::string_view bytes, const MediaLimits& limits);
  ~AnimatedWebpDecoder();
  AnimatedWebpDecoder(const AnimatedWebpDecoder&) = delete;
  AnimatedWebpDecoder& operator=(const AnimatedWebpDecoder&) = delete;

  // codec "webp"; duration = the sum of frame durations; fps = frames / duration.
  const VideoInfo& info() const { return info_; }

  // As VideoDecoder::Decode: frame k is shown from the end of frame k-1 to its own end
  // timestamp and serves the requested times inside that interval; empty `times` = every
  // frame. Every frame is decoded (each is composited over the previous canvas).
  int64_t Decode(std::span<const double> times, const VideoDecoder::FrameSink& sink);

 private:
  struct State;
  std::unique_ptr<State> s_;
  VideoInfo info_;
  MediaLimits limits_;
};

}  // namespace m3::media
