// Helpers for the media tests: generating inputs with the ffmpeg CLI and OpenCV, and the
// expected pipeline output for known pixels (resample + patchify without any decoder).
#pragma once

#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "gateway/media/bicubic_resampler.h"
#include "gateway/media/m3_vision_processor.h"
#include "gateway/media/media_preprocessor.h"
#include "shared/error.h"
#include "tests/test_util.h"

namespace m3::media::test {

inline std::shared_ptr<const M3VisionProcessor> Processor() {
  static auto p = std::make_shared<const M3VisionProcessor>(M3VisionConfig{});
  return p;
}

// Inserts an APP1 Exif segment (TIFF body `tiff`) right after a JPEG's SOI.
inline std::string WithApp1(const std::string& jpeg, const std::string& tiff) {
  const std::string payload = std::string("Exif\0\0", 6) + tiff;
  const size_t len = payload.size() + 2;
  std::string app1 = "\xFF\xE1";
  app1 += char(len >> 8);
  app1 += char(len & 0xff);
  return jpeg.substr(0, 2) + app1 + payload + jpeg.substr(2);
}

// A TIFF body holding only an Orientation tag, in either byte order.
inline std::string OrientationTiff(uint16_t orientation, bool little_endian) {
  if (little_endian) {
    return std::string("II*\0\x08\0\0\0", 8) + std::string("\x01\0", 2) +
           std::string("\x12\x01\x03\0\x01\0\0\0", 8) + std::string(1, char(orientation)) +
           std::string("\0\0\0", 3) + std::string("\0\0\0\0", 4);
  }
  return std::string("MM\0*\0\0\0\x08", 8) + std::string("\0\x01", 2) +
         std::string("\x01\x12\0\x03\0\0\0\x01", 8) + std::string(1, '\0') +
         std::string(1, char(orientation)) + std::string("\0\0", 2) + std::string("\0\0\0\0", 4);
}

// An 8-bit BGR OpenCV image as an RGB-ordered ImageBuffer (the order our decoders produce), for
// byte comparisons with them.
inline ImageBuffer RgbFromBgrMat(const cv::Mat& bgr) {
  ImageBuffer out;
  out.Allocate(bgr.cols, bgr.rows, ChannelOrder::kRGB);
  for (int y = 0; y < bgr.rows; ++y) {
    for (int x = 0; x < bgr.cols; ++x) {
      const auto p = bgr.at<cv::Vec3b>(y, x);
      uint8_t* d = out.row(y) + 3 * x;
      d[0] = p[2];
      d[1] = p[1];
      d[2] = p[0];
    }
  }
  return out;
}

inline const MediaPreprocessor& Pre() {
  static const MediaPreprocessor pre(Processor(), MediaLimits{});
  return pre;
}

// Runs ffmpeg quietly with `args`; fails the test when it fails.
inline void Ffmpeg(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/ffmpeg", "-nostdin", "-v", "error", "-y"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = m3::test::RunProcess(argv);
  INFO("ffmpeg stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
}

// Raw RGB24 frames of `path` as the ffmpeg CLI decodes them (auto-rotation applied).
inline std::string FfmpegRgbFrames(const std::string& path) {
  const auto r = m3::test::RunProcess({"/usr/bin/ffmpeg", "-nostdin", "-v", "error", "-i", path,
                                       "-f", "rawvideo", "-pix_fmt", "rgb24", "-"});
  REQUIRE(r.exit_code == 0);
  return r.out;
}

// The image pipeline applied to known pixels: what ProcessImage must give for an input that
// decodes to `pixels`.
inline HostTensor ExpectedImage(const ImageBuffer& pixels, const MediaOptions& options = {}) {
  const ResizeTarget t = Processor()->ImageResize(pixels.height, pixels.width, options);
  ImageBuffer resized;
  BicubicResampler(pixels.width, pixels.height, t.width, t.height).Resize(pixels, resized);
  const PatchLayout layout = Processor()->Layout(1, t.height, t.width);
  HostTensor out(DType::kF32, {layout.rows, layout.patch_dim});
  Processor()->WriteFrame(resized, 0, 1, out.as<float>().data());
  return out;
}

inline double MaxAbsDiff(const HostTensor& a, const HostTensor& b) {
  REQUIRE(a.shape() == b.shape());
  double m = 0;
  const auto x = a.as<float>();
  const auto y = b.as<float>();
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, double(std::abs(x[i] - y[i])));
  return m;
}

inline double MeanAbsDiff(const HostTensor& a, const HostTensor& b) {
  REQUIRE(a.shape() == b.shape());
  double s = 0;
  const auto x = a.as<float>();
  const auto y = b.as<float>();
  for (size_t i = 0; i < x.size(); ++i) s += std::abs(x[i] - y[i]);
  return s / std::max<size_t>(1, x.size());
}

// Calls `f` and returns the m3::Error code it throws; fails the test when it does not throw.
template <typename F>
ErrorCode ErrorOf(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  FAIL("expected an m3::Error");
  return ErrorCode::kInternal;
}

}  // namespace m3::media::test
