// Image decoding through MediaPreprocessor::ProcessImage for every supported format, with
// files generated at test time (OpenCV imencode, the ffmpeg CLI): the result must equal the
// pipeline applied to the pixels the file holds (exactly for lossless formats), with PIL's
// conversions (EXIF orientation, JPEG/PNG/WebP, alpha dropped, grayscale/palette expanded, 16-bit
// reduced).
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <thread>

#include "gateway/media/exif_orientation.h"
#include "gateway/media/image_decoder.h"
#include "gateway/media/image_header.h"
#include "tests/media/media_test_util.h"

using namespace m3;
using namespace m3::media;
using namespace m3::media::test;

namespace {

// A 200x150 BGR picture with gradients and edges, so resampling differences show.
cv::Mat Picture(int w = 200, int h = 150) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      auto& p = m.at<cv::Vec3b>(y, x);
      p[0] = static_cast<uint8_t>((x * 255) / w);
      p[1] = static_cast<uint8_t>((y * 255) / h);
      p[2] = static_cast<uint8_t>(((x / 10 + y / 10) % 2) ? 230 : 20);
    }
  }
  return m;
}

std::string Encode(const std::string& ext, const cv::Mat& m, const std::vector<int>& params = {}) {
  std::vector<uint8_t> buf;
  REQUIRE(cv::imencode(ext, m, buf, params));
  return std::string(buf.begin(), buf.end());
}

void CheckExact(const std::string& bytes, const ImageBuffer& pixels) {
  const PreprocessedMedia got = Pre().ProcessImage(bytes, {});
  const HostTensor want = ExpectedImage(pixels);
  CHECK(got.kind == m3::content::MediaKind::kImage);
  CHECK(MaxAbsDiff(got.pixel_values, want) == 0.0);
}

}  // namespace

TEST_CASE("lossless formats decode to the exact pixels: PNG, BMP, TIFF, WebP lossless") {
  const cv::Mat pic = Picture();
  const ImageBuffer pixels = ImageBufferFromBgrMat(pic);
  for (const std::string ext : {".png", ".bmp", ".tiff"}) {
    CAPTURE(ext);
    CheckExact(Encode(ext, pic), pixels);
  }
  const std::string webp = Encode(".webp", pic, {cv::IMWRITE_WEBP_QUALITY, 101});
  CHECK(ReadImageHeader(webp).format == MediaFormat::kWebp);
  CheckExact(webp, pixels);
}

TEST_CASE("JPEG and lossy WebP decode like libjpeg/libwebp and stay close to the source") {
  const cv::Mat pic = Picture();
  for (const std::string ext : {".jpg", ".webp"}) {
    CAPTURE(ext);
    const std::string bytes =
        Encode(ext, pic,
               ext == ".jpg" ? std::vector<int>{cv::IMWRITE_JPEG_QUALITY, 95}
                             : std::vector<int>{cv::IMWRITE_WEBP_QUALITY, 95});
    const ImageHeader h = ReadImageHeader(bytes);
    CHECK(h.width == 200);
    CHECK(h.height == 150);
    const cv::Mat decoded = cv::imdecode(
        cv::Mat(1, int(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data())), cv::IMREAD_COLOR);
    CheckExact(bytes, ImageBufferFromBgrMat(decoded));
    const PreprocessedMedia got = Pre().ProcessImage(bytes, {});
    CHECK(MeanAbsDiff(got.pixel_values, ExpectedImage(ImageBufferFromBgrMat(pic))) <
          0.25);  // 4:2:0 chroma on sharp edges
  }
}

TEST_CASE("EXIF orientation is applied (JPEG orientation 6 = rotate 90 clockwise)") {
  const cv::Mat pic = Picture();
  const std::string plain = Encode(".jpg", pic, {cv::IMWRITE_JPEG_QUALITY, 95});
  const std::string rotated = WithApp1(plain, OrientationTiff(6, /*little_endian=*/false));
  const cv::Mat decoded = cv::imdecode(
      cv::Mat(1, int(plain.size()), CV_8UC1, const_cast<char*>(plain.data())), cv::IMREAD_COLOR);
  cv::Mat turned;
  cv::rotate(decoded, turned, cv::ROTATE_90_CLOCKWISE);
  const PreprocessedMedia got = Pre().ProcessImage(rotated, {});
  const HostTensor want = ExpectedImage(ImageBufferFromBgrMat(turned));
  CHECK(MaxAbsDiff(got.pixel_values, want) == 0.0);
  // 150 wide x 200 high once turned: grid rows > grid columns.
  CHECK(got.grid_thw[1] > got.grid_thw[2]);
}

TEST_CASE("grayscale, RGBA and 16-bit PNGs convert like PIL's convert('RGB')") {
  const cv::Mat pic = Picture();
  SUBCASE("8-bit grayscale is replicated to three channels") {
    cv::Mat gray(pic.rows, pic.cols, CV_8UC1);
    for (int y = 0; y < pic.rows; ++y)
      for (int x = 0; x < pic.cols; ++x) gray.at<uint8_t>(y, x) = pic.at<cv::Vec3b>(y, x)[1];
    cv::Mat three;
    cv::Mat planes[] = {gray, gray, gray};
    cv::merge(planes, 3, three);
    CheckExact(Encode(".png", gray), ImageBufferFromBgrMat(three));
  }
  SUBCASE("alpha is dropped without compositing") {
    cv::Mat bgra(pic.rows, pic.cols, CV_8UC4);
    for (int y = 0; y < pic.rows; ++y) {
      for (int x = 0; x < pic.cols; ++x) {
        const auto p = pic.at<cv::Vec3b>(y, x);
        bgra.at<cv::Vec4b>(y, x) = {p[0], p[1], p[2], static_cast<uint8_t>(x % 256)};
      }
    }
    CheckExact(Encode(".png", bgra), ImageBufferFromBgrMat(pic));
  }
  SUBCASE("16-bit RGB keeps the high byte") {
    cv::Mat deep(pic.rows, pic.cols, CV_16UC3);
    for (int y = 0; y < pic.rows; ++y) {
      for (int x = 0; x < pic.cols; ++x) {
        const auto p = pic.at<cv::Vec3b>(y, x);
        deep.at<cv::Vec3w>(y, x) = {uint16_t(p[0] * 256 + 200), uint16_t(p[1] * 256 + 17),
                                    uint16_t(p[2] * 256 + 255)};
      }
    }
    CheckExact(Encode(".png", deep), ImageBufferFromBgrMat(pic));
  }
  SUBCASE("16-bit grayscale is clamped to 255 (PIL's I;16 -> RGB)") {
    cv::Mat deep(pic.rows, pic.cols, CV_16UC1);
    cv::Mat three(pic.rows, pic.cols, CV_8UC3);
    for (int y = 0; y < pic.rows; ++y) {
      for (int x = 0; x < pic.cols; ++x) {
        const uint16_t v = static_cast<uint16_t>((x * 7 + y * 3) % 400);
        deep.at<uint16_t>(y, x) = v;
        const uint8_t c = static_cast<uint8_t>(std::min<int>(v, 255));
        three.at<cv::Vec3b>(y, x) = {c, c, c};
      }
    }
    CheckExact(Encode(".png", deep), ImageBufferFromBgrMat(three));
  }
}

TEST_CASE("palette PNG and GIF (first frame, via FFmpeg) decode to their colours") {
  const std::string dir = m3::test::TempDir();
  Ffmpeg({"-f", "lavfi", "-i", "testsrc2=size=120x90:rate=5", "-frames:v", "1", "-pix_fmt", "pal8",
          dir + "/pal.png"});
  Ffmpeg({"-f", "lavfi", "-i", "testsrc2=size=120x90:rate=5", "-t", "1", dir + "/anim.gif"});
  Ffmpeg(
      {"-f", "lavfi", "-i", "testsrc2=size=120x90:rate=5", "-frames:v", "1", dir + "/still.gif"});
  for (const std::string name : {"pal.png", "anim.gif", "still.gif"}) {
    CAPTURE(name);
    const std::string path = dir + "/" + name;
    const std::string rgb = FfmpegRgbFrames(path);
    REQUIRE(rgb.size() >= 120 * 90 * 3);
    ImageBuffer first;
    first.Allocate(120, 90, ChannelOrder::kRGB);
    std::memcpy(first.pixels.data(), rgb.data(), 120 * 90 * 3);
    const std::string bytes = m3::test::ReadFile(path);
    const PreprocessedMedia got = Pre().ProcessImage(bytes, {});
    CHECK(MaxAbsDiff(got.pixel_values, ExpectedImage(first)) == 0.0);
  }
}

TEST_CASE("formats are detected by content, not by name") {
  const cv::Mat pic = Picture(64, 64);
  CHECK(ReadImageHeader(Encode(".png", pic)).format == MediaFormat::kPng);
  CHECK(ReadImageHeader(Encode(".jpg", pic)).format == MediaFormat::kJpeg);
  CHECK(ReadImageHeader(Encode(".bmp", pic)).format == MediaFormat::kBmp);
  CHECK(ReadImageHeader(Encode(".tiff", pic)).format == MediaFormat::kTiff);
  const ImageHeader h = ReadImageHeader(Encode(".tiff", Picture(77, 33)));
  CHECK(h.width == 77);
  CHECK(h.height == 33);
}

TEST_CASE("min/max pixel options change the resize target") {
  const std::string png = Encode(".png", Picture());
  MediaOptions small;
  small.max_pixels = 56 * 56;
  const PreprocessedMedia a = Pre().ProcessImage(png, small);
  CHECK(a.grid_thw[1] * a.grid_thw[2] * 14 * 14 <= 56 * 56);
  MediaOptions big;
  big.min_pixels = 400 * 400;
  big.max_pixels = 1000 * 1000;
  const PreprocessedMedia b = Pre().ProcessImage(png, big);
  CHECK(b.grid_thw[1] * b.grid_thw[2] * 14 * 14 >= 400 * 400);
  CHECK(b.prompt_expansion.rfind("]<]start of image[>[", 0) == 0);
  CHECK(b.placeholder_tokens == b.grid_thw[1] * b.grid_thw[2] / 4);
}

TEST_CASE("concurrent calls on one preprocessor give identical results") {
  const std::string png = Encode(".png", Picture(300, 220));
  const PreprocessedMedia want = Pre().ProcessImage(png, {});
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int k = 0; k < 5; ++k) {
        const PreprocessedMedia got = Pre().ProcessImage(png, {});
        if (got.pixel_values.nbytes() != want.pixel_values.nbytes() ||
            std::memcmp(got.pixel_values.data(), want.pixel_values.data(),
                        want.pixel_values.nbytes()) != 0) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(mismatches == 0);
}

namespace {

// `webp` (a simple lossless file: RIFF, WEBP, one VP8L chunk) in the extended layout with an
// EXIF chunk after the image data, as encoders that keep metadata write it.
std::string WithWebpExif(const std::string& webp, const std::string& exif, int w, int h) {
  auto le = [](uint32_t v, int bytes) {
    std::string s;
    for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
    return s;
  };
  const std::string vp8x = "VP8X" + le(10, 4) + le(0x08, 4) + le(w - 1, 3) + le(h - 1, 3);
  std::string exif_chunk = "EXIF" + le(static_cast<uint32_t>(exif.size()), 4) + exif;
  if (exif.size() % 2) exif_chunk += '\0';
  const std::string body = "WEBP" + vp8x + webp.substr(12) + exif_chunk;
  return "RIFF" + le(static_cast<uint32_t>(body.size()), 4) + body;
}

}  // namespace

TEST_CASE("WebP EXIF orientation is applied like PIL's exif_transpose") {
  const cv::Mat pic = Picture(60, 40);
  const std::string plain = Encode(".webp", pic, {cv::IMWRITE_WEBP_QUALITY, 101});  // lossless
  REQUIRE(plain.substr(12, 4) == "VP8L");
  const ImageBuffer stored = ImageBufferFromBgrMat(pic);
  for (int orientation = 1; orientation <= 8; ++orientation) {
    for (const bool prefix : {false, true}) {
      CAPTURE(orientation);
      CAPTURE(prefix);
      const std::string tiff = OrientationTiff(static_cast<uint16_t>(orientation), prefix);
      const std::string webp =
          WithWebpExif(plain, (prefix ? std::string("Exif\0\0", 6) : std::string()) + tiff, 60, 40);
      const ImageBuffer decoded = DecodeImage(webp, ReadImageHeader(webp), MediaLimits{});
      const ImageBuffer upright = ApplyExifOrientation(stored, orientation);
      REQUIRE(decoded.width == upright.width);
      REQUIRE(decoded.height == upright.height);
      CHECK(std::memcmp(decoded.pixels.data(), upright.pixels.data(),
                        upright.width * upright.height * 3) == 0);
      if (orientation == 6) CheckExact(webp, upright);
    }
  }
}
