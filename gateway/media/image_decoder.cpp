// Image decoding with libjpeg-turbo (JPEG), libpng (PNG), OpenCV imgcodecs and FFmpeg (GIF); see
// image_decoder.h.
#include "gateway/media/image_decoder.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>

#include "gateway/media/exif_orientation.h"
#include "gateway/media/jpeg_decoder.h"
#include "gateway/media/png_decoder.h"
#include "gateway/media/video_decoder.h"
#include "shared/error.h"

namespace m3::media {
namespace {

// A GIF sent as an image is its first frame (as PIL's Image.open gives it). FFmpeg decodes it,
// but it is an image: the video bounds on length and frame count do not apply (only one frame
// is decoded), and failures are reported as GIF errors, not video ones.
ImageBuffer DecodeGif(std::string_view bytes, const MediaLimits& limits) {
  MediaLimits first_frame = limits;
  first_frame.max_video_seconds = 1e18;
  first_frame.max_video_frames_decoded = INT64_MAX;
  ImageBuffer first;
  try {
    VideoDecoder decoder(bytes, first_frame);
    const double t0 = 0.0;
    decoder.Decode(std::span<const double>(&t0, 1), [&](const ImageBuffer& f, int64_t, double) {
      first = f;
      return false;
    });
  } catch (const Error& e) {
    std::string message = e.what();
    if (message.rfind("video: ", 0) == 0) message = message.substr(7);
    throw Error(e.code() == ErrorCode::kTooLarge ? e.code() : ErrorCode::kInvalidArgument,
                "GIF: " + message);
  }
  Require(first.width > 0 && first.height > 0, ErrorCode::kInvalidArgument,
          "GIF: no frame could be decoded");
  return first;
}

}  // namespace

ImageBuffer DecodeImage(std::string_view bytes, const ImageHeader& header,
                        const MediaLimits& limits) {
  if (header.format == MediaFormat::kGif) return DecodeGif(bytes, limits);
  const cv::Mat encoded(1, static_cast<int>(bytes.size()), CV_8UC1,
                        const_cast<char*>(bytes.data()));
  const std::string what(FormatName(header.format));
  if (header.format == MediaFormat::kJpeg) {
    if (auto rgb = DecodeJpeg(bytes)) return std::move(*rgb);
    // CMYK / YCCK: OpenCV's conversion below.
  }
  if (header.format == MediaFormat::kPng) {
    if (auto rgb = DecodePng(bytes)) return std::move(*rgb);
  }
  try {
    // Decode straight into the padded buffer when the decoder keeps the header's size (no
    // EXIF rotation); otherwise copy what it produced.
    ImageBuffer out;
    out.Allocate(header.width, header.height, ChannelOrder::kBGR);
    cv::Mat target(static_cast<int>(header.height), static_cast<int>(header.width), CV_8UC3,
                   out.pixels.data());
    cv::imdecode(encoded, cv::IMREAD_COLOR, &target);
    Require(!target.empty() && target.type() == CV_8UC3, ErrorCode::kInvalidArgument,
            what + ": corrupt or truncated image data");
    ImageBuffer decoded = target.data == out.pixels.data() && target.isContinuous()
                              ? std::move(out)
                              : ImageBufferFromBgrMat(target);
    // OpenCV turns JPEGs upright but not WebPs, whose EXIF chunk PIL's exif_transpose applies.
    if (header.format == MediaFormat::kWebp) {
      return ApplyExifOrientation(std::move(decoded), ReadWebpExifOrientation(bytes));
    }
    return decoded;
  } catch (const cv::Exception& e) {
    throw Error(ErrorCode::kInvalidArgument, what + ": cannot decode: " + e.what());
  }
}

ImageBuffer ImageBufferFromBgrMat(const cv::Mat& bgr) {
  ImageBuffer out;
  out.Allocate(bgr.cols, bgr.rows, ChannelOrder::kBGR);
  for (int y = 0; y < bgr.rows; ++y) std::memcpy(out.row(y), bgr.ptr(y), out.row_bytes());
  return out;
}

}  // namespace m3::media
