// The media pipeline: limits, decoding, sampling, resampling, then the vision processor's
// patch layout and prompt text. Nothing here knows which model it serves.
#include "gateway/media/media_preprocessor.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "gateway/media/animated_webp_decoder.h"
#include "gateway/media/bicubic_resampler.h"
#include "gateway/media/exif_orientation.h"
#include "gateway/media/frame_sampler.h"
#include "gateway/media/image_decoder.h"
#include "gateway/media/image_header.h"
#include "gateway/media/jpeg_decoder.h"
#include "gateway/media/png_decoder.h"
#include "gateway/media/video_decoder.h"
#include "shared/error.h"

namespace m3::media {
namespace {

void ResizeTo(const ImageBuffer& in, const ResizeTarget& t, ImageBuffer& out) {
  BicubicResampler(in.width, in.height, t.width, t.height).Resize(in, out);
}

}  // namespace

MediaPreprocessor::MediaPreprocessor(std::shared_ptr<const VisionProcessor> processor,
                                     MediaLimits limits)
    : processor_(std::move(processor)), limits_(limits) {
  Require(processor_ != nullptr, ErrorCode::kInternal, "MediaPreprocessor: no vision processor");
}

PreprocessedMedia MediaPreprocessor::ProcessImage(std::string_view bytes,
                                                  const MediaOptions& options,
                                                  const OutputCheck& check) const {
  Require(static_cast<int64_t>(bytes.size()) <= limits_.max_encoded_bytes, ErrorCode::kTooLarge,
          "image of " + std::to_string(bytes.size()) + " bytes is over the limit");
  const ImageHeader header = ReadImageHeader(bytes);
  const int64_t pixels = header.width * header.height;
  Require(pixels <= limits_.max_image_pixels, ErrorCode::kTooLarge,
          std::string(FormatName(header.format)) + " image of " + std::to_string(header.width) +
              "x" + std::to_string(header.height) + " = " + std::to_string(pixels) +
              " pixels is over the limit of " + std::to_string(limits_.max_image_pixels) +
              " pixels (decompression bomb guard)");
  Require(!header.animated || header.format != MediaFormat::kWebp, ErrorCode::kUnsupported,
          "animated WebP is not supported as an image (send it as a video)");
  // Shape checks (aspect ratio) and the output bounds before spending time on decoding.
  {
    const ResizeTarget t = processor_->ImageResize(header.height, header.width, options);
    const PatchLayout l = processor_->Layout(1, t.height, t.width);
    if (check) check(t.height * t.width, l.rows * l.patch_dim * int64_t{sizeof(float)});
  }

  // JPEG and PNG (the common cases) decode and resize in one streaming pass, never holding the
  // full-size picture; other formats, and CMYK JPEGs, are decoded whole first.
  ResizeTarget target;
  std::optional<ImageBuffer> resized;
  if (header.format == MediaFormat::kJpeg || header.format == MediaFormat::kPng) {
    const bool jpeg = header.format == MediaFormat::kJpeg;
    // The target is for the upright picture; EXIF rotations swap the stored axes.
    const bool swap =
        OrientationSwapsAxes(jpeg ? ReadJpegExifOrientation(bytes) : ReadPngExifOrientation(bytes));
    target = processor_->ImageResize(swap ? header.width : header.height,
                                     swap ? header.height : header.width, options);
    if (jpeg) {
      const int denom = limits_.jpeg_draft
                            ? JpegDraftDenominator(header.width, header.height,
                                                   swap ? target.height : target.width,
                                                   swap ? target.width : target.height)
                            : 1;
      resized = DecodeJpegResized(bytes, target.width, target.height, denom);
    } else {
      resized = DecodePngResized(bytes, target.width, target.height);
    }
  }
  if (!resized) {
    const ImageBuffer decoded = DecodeImage(bytes, header, limits_);
    target = processor_->ImageResize(decoded.height, decoded.width, options);
    resized.emplace();
    ResizeTo(decoded, target, *resized);
  }

  const PatchLayout layout = processor_->Layout(1, target.height, target.width);
  PreprocessedMedia out;
  out.kind = content::MediaKind::kImage;
  // WriteFrame fills every element (the temporal padding slots too).
  out.pixel_values = HostTensor::Uninitialized(DType::kF32, {layout.rows, layout.patch_dim});
  processor_->WriteFrame(*resized, 0, 1, out.pixel_values.as<float>().data());
  out.grid_thw = layout.grid_thw;
  out.placeholder_tokens = processor_->PlaceholderTokens(layout.grid_thw);
  out.prompt_expansion = processor_->ImagePrompt(layout.grid_thw);
  return out;
}

PreprocessedMedia MediaPreprocessor::ProcessVideo(std::string_view bytes,
                                                  const MediaOptions& options,
                                                  const OutputCheck& check) const {
  const MediaFormat format = SniffFormat(bytes);
  Require(format != MediaFormat::kPng && format != MediaFormat::kJpeg &&
              format != MediaFormat::kBmp && format != MediaFormat::kTiff,
          ErrorCode::kInvalidArgument,
          "the data is a still " + std::string(FormatName(format)) + " image, not a video");
  // Animated WebP through libwebpdemux (FFmpeg 5.1 cannot decode it); everything else through
  // FFmpeg. Both deliver frames at requested times the same way.
  std::optional<AnimatedWebpDecoder> webp;
  std::optional<VideoDecoder> av;
  if (format == MediaFormat::kWebp) {
    Require(ReadImageHeader(bytes).animated, ErrorCode::kInvalidArgument,
            "the data is a still WebP image, not a video");
    webp.emplace(bytes, limits_);
  } else {
    av.emplace(bytes, limits_);
  }
  const VideoInfo& info = webp ? webp->info() : av->info();
  const FrameSampling sampling = processor_->VideoSampling(options);
  if (sampling.all_frames) {
    Require(info.frame_count <= limits_.max_video_frames_decoded, ErrorCode::kTooLarge,
            "video has " + std::to_string(info.frame_count) + " frames, over the limit of " +
                std::to_string(limits_.max_video_frames_decoded));
  }
  const std::vector<double> times = SampleFrameTimes(sampling, info.duration, info.frame_count);
  const int64_t expected =
      sampling.all_frames ? info.frame_count : static_cast<int64_t>(times.size());
  const ResizeTarget target = processor_->VideoResize(info.height, info.width, expected, options);
  if (check) {
    const PatchLayout l =
        processor_->Layout(std::max<int64_t>(expected, 1), target.height, target.width);
    check(std::max<int64_t>(expected, 1) * target.height * target.width,
          l.rows * l.patch_dim * int64_t{sizeof(float)});
  }

  // One resampler per input size (a stream may change resolution mid-way).
  std::unique_ptr<BicubicResampler> resampler;
  std::vector<ImageBuffer> frames;
  std::vector<double> stamps;
  frames.reserve(expected);
  const VideoDecoder::FrameSink sink = [&](const ImageBuffer& f, int64_t, double seconds) {
    if (!resampler || resampler->horizontal().in_size != f.width ||
        resampler->vertical().in_size != f.height) {
      resampler =
          std::make_unique<BicubicResampler>(f.width, f.height, target.width, target.height);
    }
    frames.emplace_back();
    resampler->Resize(f, frames.back());
    stamps.push_back(seconds);
    return true;
  };
  if (webp) {
    webp->Decode(times, sink);
  } else {
    av->Decode(times, sink);
  }
  Require(!frames.empty(), ErrorCode::kInvalidArgument, "video: no frame could be decoded");

  const int64_t count = static_cast<int64_t>(frames.size());
  const PatchLayout layout = processor_->Layout(count, target.height, target.width);
  PreprocessedMedia out;
  out.kind = content::MediaKind::kVideo;
  out.pixel_values = HostTensor::Uninitialized(DType::kF32, {layout.rows, layout.patch_dim});
  float* data = out.pixel_values.as<float>().data();
  for (int64_t i = 0; i < count; ++i) processor_->WriteFrame(frames[i], i, count, data);
  out.grid_thw = layout.grid_thw;
  out.timestamps = std::move(stamps);
  out.placeholder_tokens = processor_->PlaceholderTokens(layout.grid_thw);
  out.prompt_expansion = processor_->VideoPrompt(layout.grid_thw, out.timestamps);
  return out;
}

}  // namespace m3::media
