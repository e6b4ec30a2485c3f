// JPEG decoding with libjpeg-turbo: pixels equal OpenCV's libjpeg decode (the same library and
// IDCT settings PIL uses) for baseline 4:2:0, 4:4:4 and 4:2:2 (cjpeg), progressive, restart
// markers and grayscale; all eight EXIF orientations; the streaming decode + resize equals
// decoding whole then resizing; the EXIF parser on malformed segments;
// and the opt-in fast (DCT-scaled, draft) mode: its scale choice, its error bound against the
// exact path on the golden photos, and that the default path is unchanged.
#include <doctest/doctest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "gateway/media/bicubic_resampler.h"
#include "gateway/media/exif_orientation.h"
#include "gateway/media/image_header.h"
#include "gateway/media/jpeg_decoder.h"
#include "tests/media/media_test_util.h"

using namespace m3;
using namespace m3::media;
using namespace m3::media::test;

namespace {

// Photo-like: gradients, a hard-edged disc and deterministic noise.
cv::Mat Picture(int w, int h) {
  cv::Mat m(h, w, CV_8UC3);
  uint32_t state = 99;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      state = state * 1664525u + 1013904223u;
      const int noise = static_cast<int>((state >> 24) % 9) - 4;
      const bool disc = (x - w / 3) * (x - w / 3) + (y - h / 2) * (y - h / 2) < (h / 4) * (h / 4);
      auto& p = m.at<cv::Vec3b>(y, x);
      p[0] = static_cast<uint8_t>(std::clamp((x * 255) / w + noise, 0, 255));
      p[1] = static_cast<uint8_t>(std::clamp(disc ? 40 : (y * 255) / h + noise, 0, 255));
      p[2] = static_cast<uint8_t>(std::clamp(disc ? 220 : 128 + noise, 0, 255));
    }
  }
  return m;
}

std::string Encode(const cv::Mat& m, std::vector<int> params) {
  std::vector<uint8_t> buf;
  REQUIRE(cv::imencode(".jpg", m, buf, params));
  return std::string(buf.begin(), buf.end());
}

// OpenCV's decode (BGR, EXIF applied) as an RGB buffer.
ImageBuffer OpenCvRgb(const std::string& bytes, int flags = cv::IMREAD_COLOR) {
  const cv::Mat bgr =
      cv::imdecode(cv::Mat(1, int(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data())), flags);
  REQUIRE(!bgr.empty());
  return RgbFromBgrMat(bgr);
}

void CheckSamePixels(const ImageBuffer& a, const ImageBuffer& b) {
  REQUIRE(a.width == b.width);
  REQUIRE(a.height == b.height);
  REQUIRE(a.order == ChannelOrder::kRGB);
  CHECK(std::memcmp(a.pixels.data(), b.pixels.data(), a.width * a.height * 3) == 0);
}

// Pixel (x, y) of the upright picture, per the EXIF definition of each orientation: where
// the stored picture's first row and column end up.
const uint8_t* Upright(const ImageBuffer& stored, int orientation, int64_t x, int64_t y) {
  const int64_t w = stored.width, h = stored.height;
  switch (orientation) {
    case 2:
      return stored.row(y) + 3 * (w - 1 - x);
    case 3:
      return stored.row(h - 1 - y) + 3 * (w - 1 - x);
    case 4:
      return stored.row(h - 1 - y) + 3 * x;
    case 5:
      return stored.row(x) + 3 * y;
    case 6:
      return stored.row(h - 1 - x) + 3 * y;
    case 7:
      return stored.row(h - 1 - x) + 3 * (w - 1 - y);
    case 8:
      return stored.row(x) + 3 * (w - 1 - y);
    default:
      return stored.row(y) + 3 * x;
  }
}

}  // namespace

TEST_CASE("libjpeg-turbo decode equals OpenCV's libjpeg decode in RGB") {
  const cv::Mat pic = Picture(203, 117);  // odd sizes: partial MCUs
  SUBCASE("baseline 4:2:0, progressive, restart markers") {
    for (const auto& params : std::vector<std::vector<int>>{
             {cv::IMWRITE_JPEG_QUALITY, 90},
             {cv::IMWRITE_JPEG_QUALITY, 75, cv::IMWRITE_JPEG_PROGRESSIVE, 1},
             {cv::IMWRITE_JPEG_QUALITY, 95, cv::IMWRITE_JPEG_RST_INTERVAL, 3}}) {
      const std::string bytes = Encode(pic, params);
      const auto got = DecodeJpeg(bytes);
      REQUIRE(got.has_value());
      CheckSamePixels(*got, OpenCvRgb(bytes));
    }
  }
  SUBCASE("grayscale JPEG expands to three equal channels") {
    cv::Mat gray(pic.rows, pic.cols, CV_8UC1);
    for (int y = 0; y < pic.rows; ++y)
      for (int x = 0; x < pic.cols; ++x) gray.at<uint8_t>(y, x) = pic.at<cv::Vec3b>(y, x)[1];
    const std::string bytes = Encode(gray, {cv::IMWRITE_JPEG_QUALITY, 90});
    const auto got = DecodeJpeg(bytes);
    REQUIRE(got.has_value());
    CheckSamePixels(*got, OpenCvRgb(bytes));
  }
  SUBCASE("4:4:4 and 4:2:2 from cjpeg") {
    const std::string dir = m3::test::TempDir();
    REQUIRE(cv::imwrite(dir + "/in.ppm", pic));
    for (const std::string sample : {"1x1", "2x1"}) {
      CAPTURE(sample);
      const auto r = m3::test::RunProcess({"/usr/bin/cjpeg", "-quality", "92", "-sample", sample,
                                           "-outfile", dir + "/out.jpg", dir + "/in.ppm"});
      REQUIRE(r.exit_code == 0);
      const std::string bytes = m3::test::ReadFile(dir + "/out.jpg");
      const auto got = DecodeJpeg(bytes);
      REQUIRE(got.has_value());
      CheckSamePixels(*got, OpenCvRgb(bytes));
    }
  }
}

TEST_CASE("all eight EXIF orientations are applied like the EXIF definition and OpenCV") {
  const cv::Mat pic = Picture(61, 37);
  const std::string plain = Encode(pic, {cv::IMWRITE_JPEG_QUALITY, 95});
  const auto stored = DecodeJpeg(plain);
  REQUIRE(stored.has_value());
  for (bool little : {false, true}) {
    for (int o = 1; o <= 8; ++o) {
      CAPTURE(o);
      CAPTURE(little);
      const std::string bytes = WithApp1(plain, OrientationTiff(uint16_t(o), little));
      CHECK(ReadJpegExifOrientation(bytes) == o);
      const auto got = DecodeJpeg(bytes);
      REQUIRE(got.has_value());
      const bool swap = o >= 5;
      REQUIRE(got->width == (swap ? 37 : 61));
      REQUIRE(got->height == (swap ? 61 : 37));
      bool same = true;
      for (int64_t y = 0; y < got->height && same; ++y) {
        for (int64_t x = 0; x < got->width && same; ++x) {
          same = std::memcmp(got->row(y) + 3 * x, Upright(*stored, o, x, y), 3) == 0;
        }
      }
      CHECK(same);
      CheckSamePixels(*got, OpenCvRgb(bytes));  // OpenCV applies EXIF orientation too
    }
  }
}

TEST_CASE("streaming decode + resize equals decoding whole, then resizing") {
  const cv::Mat pic = Picture(517, 389);
  const std::string dir = m3::test::TempDir();
  REQUIRE(cv::imwrite(dir + "/in.ppm", pic));
  std::vector<std::pair<std::string, std::string>> inputs = {
      {"4:2:0", Encode(pic, {cv::IMWRITE_JPEG_QUALITY, 90})},
      {"progressive", Encode(pic, {cv::IMWRITE_JPEG_QUALITY, 80, cv::IMWRITE_JPEG_PROGRESSIVE, 1})},
      {"orientation 6",
       WithApp1(Encode(pic, {cv::IMWRITE_JPEG_QUALITY, 90}), OrientationTiff(6, true))},
      {"orientation 3",
       WithApp1(Encode(pic, {cv::IMWRITE_JPEG_QUALITY, 90}), OrientationTiff(3, false))}};
  for (const std::string sample : {"1x1", "2x1", "1x2"}) {
    const auto r = m3::test::RunProcess({"/usr/bin/cjpeg", "-quality", "92", "-sample", sample,
                                         "-outfile", dir + "/out.jpg", dir + "/in.ppm"});
    REQUIRE(r.exit_code == 0);
    inputs.emplace_back(sample, m3::test::ReadFile(dir + "/out.jpg"));
  }
  cv::Mat gray(pic.rows, pic.cols, CV_8UC1);
  for (int y = 0; y < pic.rows; ++y)
    for (int x = 0; x < pic.cols; ++x) gray.at<uint8_t>(y, x) = pic.at<cv::Vec3b>(y, x)[1];
  inputs.emplace_back("grayscale", Encode(gray, {cv::IMWRITE_JPEG_QUALITY, 90}));
  for (const auto& [name, bytes] : inputs) {
    for (const int denom : {1, 2}) {
      const auto whole = DecodeJpeg(bytes, denom);
      REQUIRE(whole.has_value());
      // Down on both axes, up on both, and one axis unchanged.
      for (const auto& [w, h] :
           std::vector<std::pair<int64_t, int64_t>>{{whole->width / 3, whole->height / 2},
                                                    {whole->width + 50, whole->height * 2},
                                                    {whole->width, 28},
                                                    {28, whole->height}}) {
        CAPTURE(name);
        CAPTURE(denom);
        CAPTURE(w);
        CAPTURE(h);
        ImageBuffer expected;
        BicubicResampler(whole->width, whole->height, w, h).Resize(*whole, expected);
        const auto streamed = DecodeJpegResized(bytes, w, h, denom);
        REQUIRE(streamed.has_value());
        CheckSamePixels(*streamed, expected);
      }
    }
  }
}

TEST_CASE("malformed EXIF never fails the image: orientation 1") {
  const std::string plain = Encode(Picture(40, 30), {cv::IMWRITE_JPEG_QUALITY, 90});
  CHECK(ReadJpegExifOrientation(plain) == 1);
  CHECK(ReadJpegExifOrientation(WithApp1(plain, "MM")) == 1);                       // short TIFF
  CHECK(ReadJpegExifOrientation(WithApp1(plain, OrientationTiff(9, false))) == 1);  // out of range
  CHECK(ReadJpegExifOrientation(WithApp1(plain, OrientationTiff(0, true))) == 1);
  std::string bad_ifd = OrientationTiff(6, false);
  bad_ifd[7] = char(0x7f);  // IFD offset past the end
  CHECK(ReadJpegExifOrientation(WithApp1(plain, bad_ifd)) == 1);
  std::string bad_magic = OrientationTiff(6, false);
  bad_magic[3] = 43;
  CHECK(ReadJpegExifOrientation(WithApp1(plain, bad_magic)) == 1);
  CHECK(ReadJpegExifOrientation(std::string("\xFF\xD8\xFF\xE1\xFF\xFF", 6)) == 1);  // truncated
  CHECK(ReadJpegExifOrientation("") == 1);
  const auto got = DecodeJpeg(WithApp1(plain, bad_ifd));
  REQUIRE(got.has_value());
  CHECK(got->width == 40);
  CHECK_THROWS_AS(DecodeJpeg(std::string("\xFF\xD8\xFF\xDB\0\x02", 6) + plain.substr(200)), Error);
}

TEST_CASE("draft scale: the largest reduction that still covers the target") {
  CHECK(JpegDraftDenominator(1920, 1080, 896, 504) == 2);
  CHECK(JpegDraftDenominator(3840, 2160, 896, 504) == 4);
  CHECK(JpegDraftDenominator(8000, 4500, 896, 504) == 8);
  CHECK(JpegDraftDenominator(1000, 700, 896, 504) == 1);
  CHECK(JpegDraftDenominator(1001, 1001, 501, 126) == 2);  // ceil(1001 / 2) = 501
  CHECK(JpegDraftDenominator(1001, 1001, 502, 126) == 1);
  CHECK(JpegDraftDenominator(1001, 1001, 251, 251) == 4);  // libjpeg rounds 1001/4 up to 251
  const std::string bytes = Encode(Picture(410, 300), {cv::IMWRITE_JPEG_QUALITY, 90});
  for (int d : {2, 4, 8}) {
    const auto got = DecodeJpeg(bytes, d);
    REQUIRE(got.has_value());
    CHECK(got->width == (410 + d - 1) / d);
    CHECK(got->height == (300 + d - 1) / d);
  }
}

TEST_CASE("fast JPEG mode: bounded error on the golden photos; default path unchanged") {
  MediaLimits draft_limits;
  draft_limits.jpeg_draft = true;
  const MediaPreprocessor fast(Processor(), draft_limits);
  // Documented bound: mean abs error below 3 uint8 steps of the normalized scale (one step is
  // 1 / (255 * std) ~ 0.0146-0.0150), max below 0.75 (edges move by a fraction of a pixel).
  const double step = 1.0 / (255.0 * 0.26862954);
  for (const std::string name : {"photo_astronaut_512x512.png", "photo_chelsea_451x300.png"}) {
    CAPTURE(name);
    const cv::Mat photo =
        cv::imread(m3::test::DataPath("m3-tiny/images/" + name), cv::IMREAD_COLOR);
    REQUIRE(!photo.empty());
    const std::string jpeg = Encode(photo, {cv::IMWRITE_JPEG_QUALITY, 95});
    for (int64_t max_pixels : {int64_t{150528}, int64_t{50176}, int64_t{12544}}) {
      CAPTURE(max_pixels);
      MediaOptions opts;
      opts.max_pixels = max_pixels;
      const PreprocessedMedia exact = Pre().ProcessImage(jpeg, opts);
      const PreprocessedMedia draft = fast.ProcessImage(jpeg, opts);
      CHECK(draft.grid_thw == exact.grid_thw);
      CHECK(draft.prompt_expansion == exact.prompt_expansion);
      const double mean = MeanAbsDiff(draft.pixel_values, exact.pixel_values);
      const double max = MaxAbsDiff(draft.pixel_values, exact.pixel_values);
      MESSAGE(name << " max_pixels " << max_pixels << ": mean " << mean << " max " << max);
      CHECK(mean < 3 * step);
      CHECK(max < 0.75);
      // The default path is the exact decode (libjpeg-turbo = OpenCV's pixels) + resampling.
      CHECK(MaxAbsDiff(exact.pixel_values, ExpectedImage(OpenCvRgb(jpeg), opts)) == 0.0);
    }
  }
  // A target above half the stored size leaves no reduction: bit-identical.
  const std::string big = Encode(Picture(500, 400), {cv::IMWRITE_JPEG_QUALITY, 90});
  CHECK(MaxAbsDiff(fast.ProcessImage(big, {}).pixel_values,
                   Pre().ProcessImage(big, {}).pixel_values) == 0.0);
}
