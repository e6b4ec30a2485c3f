// Animated WebP decoding with libwebpdemux's WebPAnimDecoder; see animated_webp_decoder.h.
#include "gateway/media/animated_webp_decoder.h"

#include <webp/decode.h>
#include <webp/demux.h>

#include <string>

#include "gateway/media/image_header.h"
#include "shared/error.h"

namespace m3::media {

struct AnimatedWebpDecoder::State {
  WebPData data{};
  WebPAnimDecoder* decoder = nullptr;
  ~State() {
    if (decoder) WebPAnimDecoderDelete(decoder);
  }
};

AnimatedWebpDecoder::AnimatedWebpDecoder(std::string_view bytes, const MediaLimits& limits)
    : s_(std::make_unique<State>()), limits_(limits) {
  // WebPAnimDecoderNew allocates two canvases up front (up to 16 GB each, which it may get as
  // untouched virtual memory): the canvas size from the VP8X header is checked first.
  const ImageHeader header = ReadImageHeader(bytes);
  Require(header.format == MediaFormat::kWebp, ErrorCode::kInvalidArgument, "not a WebP file");
  Require(header.width * header.height <= limits.max_video_pixels_per_frame, ErrorCode::kTooLarge,
          "WebP animation canvas of " + std::to_string(header.width) + "x" +
              std::to_string(header.height) + " is over the per-frame pixel limit");
  s_->data.bytes = reinterpret_cast<const uint8_t*>(bytes.data());
  s_->data.size = bytes.size();
  WebPAnimDecoderOptions options;
  Require(WebPAnimDecoderOptionsInit(&options) != 0, ErrorCode::kInternal,
          "WebP: libwebpdemux version mismatch");
  options.color_mode = MODE_RGBA;  // the animation decoder offers no plain RGB
  options.use_threads = 0;
  s_->decoder = WebPAnimDecoderNew(&s_->data, &options);
  Require(s_->decoder != nullptr, ErrorCode::kInvalidArgument,
          "WebP: corrupt or truncated animated WebP");
  WebPAnimInfo anim{};
  Require(WebPAnimDecoderGetInfo(s_->decoder, &anim) != 0, ErrorCode::kInvalidArgument,
          "WebP: cannot read the animation header");
  Require(anim.frame_count >= 1, ErrorCode::kInvalidArgument, "WebP: animation has no frames");
  const int64_t pixels = static_cast<int64_t>(anim.canvas_width) * anim.canvas_height;
  Require(pixels <= limits.max_video_pixels_per_frame, ErrorCode::kTooLarge,
          "WebP animation canvas of " + std::to_string(anim.canvas_width) + "x" +
              std::to_string(anim.canvas_height) + " is over the per-frame pixel limit");
  Require(int64_t{anim.frame_count} <= limits.max_video_frames_decoded, ErrorCode::kTooLarge,
          "WebP animation has " + std::to_string(anim.frame_count) + " frames, over the limit of " +
              std::to_string(limits.max_video_frames_decoded));
  // Every frame is composited on the whole canvas (libwebp copies the canvas for each frame
  // that is not a key frame), so the work is frames x canvas however small the frames are: a
  // few hundred KB of 24x16 frames on an 8000x8000 canvas took about half a second a frame.
  // The budget is the work of 32 frames of the largest size the limits allow (2.1 G canvas
  // pixels by default, some 15 s; 1000 frames of 1920x1080 fit).
  const double work = static_cast<double>(anim.frame_count) * static_cast<double>(pixels);
  const double budget = 32.0 * static_cast<double>(limits.max_video_pixels_per_frame);
  Require(work <= budget, ErrorCode::kTooLarge,
          "WebP animation of " + std::to_string(anim.frame_count) + " frames on a " +
              std::to_string(anim.canvas_width) + "x" + std::to_string(anim.canvas_height) +
              " canvas is over the decoding budget of " +
              std::to_string(static_cast<int64_t>(budget)) + " canvas pixels");
  // Durations from the demuxer: no frame needs decoding to know the length.
  const WebPDemuxer* demux = WebPAnimDecoderGetDemuxer(s_->decoder);
  int64_t total_ms = 0;
  WebPIterator it;
  if (WebPDemuxGetFrame(demux, 1, &it)) {
    do {
      total_ms += it.duration;
    } while (WebPDemuxNextFrame(&it));
    WebPDemuxReleaseIterator(&it);
  }
  info_.width = anim.canvas_width;
  info_.height = anim.canvas_height;
  info_.frame_count = anim.frame_count;
  info_.duration = static_cast<double>(total_ms) / 1000.0;
  info_.fps = info_.duration > 0 ? static_cast<double>(anim.frame_count) / info_.duration : 0;
  info_.codec = "webp";
  Require(info_.duration <= limits.max_video_seconds, ErrorCode::kTooLarge,
          "WebP animation of " + std::to_string(info_.duration) + " s is longer than the limit");
}

AnimatedWebpDecoder::~AnimatedWebpDecoder() = default;

int64_t AnimatedWebpDecoder::Decode(std::span<const double> times,
                                    const VideoDecoder::FrameSink& sink) {
  constexpr double kEps = 1e-6;
  const bool all = times.empty();
  WebPAnimDecoderReset(s_->decoder);
  size_t next = 0;
  int64_t calls = 0, index = 0;
  double start = 0;
  ImageBuffer frame;
  while ((all || next < times.size()) && WebPAnimDecoderHasMoreFrames(s_->decoder)) {
    uint8_t* rgba = nullptr;
    int timestamp_ms = 0;
    Require(WebPAnimDecoderGetNext(s_->decoder, &rgba, &timestamp_ms) != 0,
            ErrorCode::kInvalidArgument, "WebP: corrupt animation frame " + std::to_string(index));
    const double end = static_cast<double>(timestamp_ms) / 1000.0;
    const bool last = !WebPAnimDecoderHasMoreFrames(s_->decoder);
    const bool wanted = all || times[next] < end - kEps || last;
    if (wanted) {
      frame.Allocate(info_.width, info_.height, ChannelOrder::kRGB);
      const int64_t n = info_.width * info_.height;
      uint8_t* d = frame.pixels.data();
      for (int64_t i = 0; i < n; ++i) {  // alpha dropped without compositing, as for images
        d[3 * i] = rgba[4 * i];
        d[3 * i + 1] = rgba[4 * i + 1];
        d[3 * i + 2] = rgba[4 * i + 2];
      }
      if (all) {
        ++calls;
        if (!sink(frame, index, start)) return calls;
      } else {
        // Requested times this frame covers; the last frame serves any left (rounding).
        while (next < times.size() && (times[next] < end - kEps || last)) {
          ++calls;
          if (!sink(frame, static_cast<int64_t>(next++), start)) return calls;
        }
      }
    }
    start = end;
    ++index;
  }
  return calls;
}

}  // namespace m3::media
