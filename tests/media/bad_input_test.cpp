// Bad and hostile input, through the C++ API and the CLI: every case is a clear m3::Error
// (or a non-zero exit naming the problem), never a crash, hang or huge allocation.
#include <doctest/doctest.h>

#include <chrono>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>

#include "gateway/media/image_header.h"
#include "shared/safetensors.h"
#include "tests/media/media_test_util.h"

using namespace m3;
using namespace m3::media;
using namespace m3::media::test;

namespace {

uint32_t Crc32(const std::string& s) {
  uint32_t c = 0xffffffffu;
  for (unsigned char ch : s) {
    c ^= ch;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

std::string Be32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)};
}

std::string PngChunk(const std::string& type, const std::string& data) {
  return Be32(static_cast<uint32_t>(data.size())) + type + data + Be32(Crc32(type + data));
}

// A PNG that declares width x height but carries only a few bytes of image data.
std::string PngBomb(uint32_t width, uint32_t height) {
  const std::string ihdr = Be32(width) + Be32(height) + std::string("\x08\x02\0\0\0", 5);
  return std::string("\x89PNG\r\n\x1a\n", 8) + PngChunk("IHDR", ihdr) +
         PngChunk("IDAT", std::string("\x78\x9c\x63\x00\x00\x00\x01\x00\x01", 9)) +
         PngChunk("IEND", "");
}

std::string SmallPng() {
  cv::Mat m(60, 80, CV_8UC3, cv::Scalar(10, 200, 90));
  std::vector<uint8_t> buf;
  REQUIRE(cv::imencode(".png", m, buf));
  return std::string(buf.begin(), buf.end());
}

std::string SmallJpeg() {
  cv::Mat m(60, 80, CV_8UC3);
  cv::randu(m, 0, 255);
  std::vector<uint8_t> buf;
  REQUIRE(cv::imencode(".jpg", m, buf));
  return std::string(buf.begin(), buf.end());
}

const std::string& Dir() {
  static const std::string dir = m3::test::TempDir();
  return dir;
}

std::string SmallMp4() {
  const std::string path = Dir() + "/ok.mp4";
  Ffmpeg({"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10", "-t", "2", "-c:v", "libx264",
          "-pix_fmt", "yuv420p", path});
  return m3::test::ReadFile(path);
}

// A tiny file whose container declares 10 hours: 2 frames, one every 5 hours.
std::string TenHourMp4() {
  const std::string path = Dir() + "/ten_hours.mp4";
  Ffmpeg({"-f", "lavfi", "-i", "color=c=red:s=32x32:r=1/18000", "-frames:v", "2", "-c:v", "libx264",
          path});
  return m3::test::ReadFile(path);
}

}  // namespace

TEST_CASE("images: empty, not an image, truncated, corrupt") {
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessImage("", {}); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("empty") != std::string::npos);
  CHECK(ErrorOf([&] { Pre().ProcessImage("hello, this is text, not a picture", {}); }, &msg) ==
        ErrorCode::kInvalidArgument);
  CHECK(msg.find("not a supported image") != std::string::npos);

  const std::string png = SmallPng();
  for (size_t cut : {size_t{4}, size_t{20}, png.size() / 2, png.size() - 20}) {
    CAPTURE(cut);
    CHECK(ErrorOf([&] { Pre().ProcessImage(png.substr(0, cut), {}); }) ==
          ErrorCode::kInvalidArgument);
  }
  const std::string jpeg = SmallJpeg();
  for (size_t cut : {size_t{3}, size_t{100}, jpeg.size() / 2, jpeg.size() - 2}) {
    CAPTURE(cut);
    CHECK(ErrorOf([&] { Pre().ProcessImage(jpeg.substr(0, cut), {}); }, &msg) ==
          ErrorCode::kInvalidArgument);
  }
  CHECK(msg.find("JPEG") != std::string::npos);
  // Corrupt payload behind a valid header: an error, or at worst a decoded picture.
  std::string corrupt = png;
  for (size_t i = 60; i < corrupt.size(); i += 7) corrupt[i] = char(corrupt[i] ^ 0x5a);
  try {
    Pre().ProcessImage(corrupt, {});
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("a 30000x30000 PNG bomb is refused from its header, quickly") {
  const std::string bomb = PngBomb(30000, 30000);
  CHECK(bomb.size() < 100);
  const auto start = std::chrono::steady_clock::now();
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessImage(bomb, {}); }, &msg) == ErrorCode::kTooLarge);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CHECK(ms < 50.0);
  CHECK(msg.find("30000x30000") != std::string::npos);
  // Under the limit but lying about its size: the decoder fails cleanly.
  CHECK(ErrorOf([&] { Pre().ProcessImage(PngBomb(2000, 2000), {}); }) ==
        ErrorCode::kInvalidArgument);
}

TEST_CASE("aspect ratio over 200 is refused; video bytes are not an image") {
  cv::Mat m(2, 1000, CV_8UC3, cv::Scalar(1, 2, 3));
  std::vector<uint8_t> buf;
  REQUIRE(cv::imencode(".png", m, buf));
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessImage(std::string(buf.begin(), buf.end()), {}); }, &msg) ==
        ErrorCode::kInvalidArgument);
  CHECK(msg.find("aspect ratio") != std::string::npos);
  CHECK(ErrorOf([&] { Pre().ProcessImage(SmallMp4(), {}); }) == ErrorCode::kUnsupported);
}

TEST_CASE("videos: empty, not a video, truncated, corrupt, 10 hours long") {
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessVideo("", {}); }) == ErrorCode::kInvalidArgument);
  CHECK(ErrorOf([&] { Pre().ProcessVideo(std::string(5000, 'x'), {}); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(ErrorOf([&] { Pre().ProcessVideo(SmallPng(), {}); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("still PNG image") != std::string::npos);

  const std::string mp4 = SmallMp4();
  // The index (moov) is at the end: a truncated file cannot be opened.
  CHECK(ErrorOf([&] { Pre().ProcessVideo(mp4.substr(0, mp4.size() / 2), {}); }, &msg) ==
        ErrorCode::kInvalidArgument);
  // Damaged frame data: decoded as far as possible or refused, never a crash.
  std::string corrupt = mp4;
  for (size_t i = 1000; i < corrupt.size() - 2000; i += 3) corrupt[i] = char(corrupt[i] * 31 + 7);
  try {
    const PreprocessedMedia got = Pre().ProcessVideo(corrupt, {});
    CHECK(got.pixel_values.numel() > 0);
  } catch (const Error& e) {
    CHECK((e.code() == ErrorCode::kInvalidArgument || e.code() == ErrorCode::kUnsupported));
  }

  const auto start = std::chrono::steady_clock::now();
  CHECK(ErrorOf([&] { Pre().ProcessVideo(TenHourMp4(), {}); }, &msg) == ErrorCode::kTooLarge);
  CHECK(msg.find("longer than the limit") != std::string::npos);
  (void)start;
}

TEST_CASE("limits: decoded-frame count") {
  MediaLimits limits;
  limits.max_video_frames_decoded = 10;
  const MediaPreprocessor pre(Processor(), limits);
  MediaOptions all;
  all.all_frames = true;
  CHECK(ErrorOf([&] { pre.ProcessVideo(SmallMp4(), all); }) == ErrorCode::kTooLarge);
}

TEST_CASE("CLI: preprocess writes the tensors; bad input exits non-zero naming the problem") {
  const std::string bin = m3::test::BinPath("m3-gateway");
  const std::string png = Dir() + "/ok.png";
  m3::test::WriteFile(png, SmallPng());
  const std::string out = Dir() + "/out.safetensors";
  auto r = m3::test::RunProcess(
      {bin, "preprocess", "--image", png, "--max-pixels", "50176", "--output", out});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("\"grid_thw\"") != std::string::npos);
  {
    const auto f = SafetensorsFile::Open(out);
    MediaOptions opts;
    opts.max_pixels = 50176;
    const PreprocessedMedia want = Pre().ProcessImage(SmallPng(), opts);
    const TensorView pv = f.Get("pixel_values");
    CHECK(pv.dtype == DType::kF32);
    CHECK(pv.shape == want.pixel_values.shape());
    CHECK(std::memcmp(pv.data, want.pixel_values.data(), pv.nbytes) == 0);
    const TensorView grid = f.Get("image_grid_thw");
    CHECK(grid.dtype == DType::kI64);
    CHECK(grid.shape == Shape{1, 3});
  }

  const std::string mp4 = Dir() + "/ok.mp4";
  SmallMp4();
  r = m3::test::RunProcess({bin, "preprocess", "--video", mp4, "--fps", "2", "--output", out});
  REQUIRE(r.exit_code == 0);
  {
    const auto f = SafetensorsFile::Open(out);
    CHECK(f.Get("pixel_values_videos").shape[1] == 1176);
    CHECK(ToInt64(f.Get("video_grid_thw"), "grid") ==
          std::vector<int64_t>{2, 4, 4});  // 4 frames of 56x56
    const TensorView ts = f.Get("video_timestamps");
    CHECK(ts.dtype == DType::kF64);
    CHECK(ts.shape == Shape{4});
  }

  struct Bad {
    std::string name, bytes, flag, needle;
  };
  const std::string jpeg = SmallJpeg();
  const std::vector<Bad> bad = {
      {"text.png", "not an image at all", "--image", "not a supported image"},
      {"trunc.jpg", jpeg.substr(0, jpeg.size() / 2), "--image", "JPEG"},
      {"empty.png", "", "--image", "empty"},
      {"bomb.png", PngBomb(30000, 30000), "--image", "over the limit"},
      {"trunc.mp4", m3::test::ReadFile(mp4).substr(0, 3000), "--video", "video"},
      {"long.mp4", TenHourMp4(), "--video", "longer than the limit"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.name);
    const std::string path = Dir() + "/" + b.name;
    m3::test::WriteFile(path, b.bytes);
    r = m3::test::RunProcess(
        {bin, "preprocess", b.flag, path, "--output", Dir() + "/x.safetensors"});
    CHECK(r.exit_code != 0);
    CHECK(r.err.find(b.needle) != std::string::npos);
    INFO(r.err);
  }
  r = m3::test::RunProcess({bin, "preprocess", "--image", Dir() + "/missing.png", "--output", out});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("missing.png") != std::string::npos);
}

TEST_CASE("animated WebP: refused as an image, decoded as a video (libwebpdemux)") {
  const std::string path = Dir() + "/anim.webp";
  Ffmpeg({"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10", "-t", "1", "-c:v", "libwebp_anim",
          "-loop", "0", path});
  const std::string bytes = m3::test::ReadFile(path);
  CHECK(ReadImageHeader(bytes).animated);
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessImage(bytes, {}); }, &msg) == ErrorCode::kUnsupported);
  CHECK(msg.find("animated WebP") != std::string::npos);
  MediaOptions all;
  all.all_frames = true;
  const PreprocessedMedia v = Pre().ProcessVideo(bytes, all);
  CHECK(v.timestamps.size() == 10);
  CHECK(v.grid_thw[0] == 5);
  // Still and truncated WebPs are not videos.
  CHECK(ErrorOf([&] { Pre().ProcessVideo(bytes.substr(0, bytes.size() / 2), {}); }) ==
        ErrorCode::kInvalidArgument);
}

TEST_CASE("mutated files (deterministic byte flips and cuts) never crash the pipeline") {
  std::mt19937 rng(1234);
  const std::string gif_path = Dir() + "/m.gif";
  Ffmpeg({"-f", "lavfi", "-i", "testsrc2=size=48x32:rate=5", "-t", "1", gif_path});
  const std::vector<std::pair<std::string, bool>> seeds = {{SmallPng(), false},
                                                           {SmallJpeg(), false},
                                                           {m3::test::ReadFile(gif_path), false},
                                                           {SmallMp4(), true},
                                                           {m3::test::ReadFile(gif_path), true}};
  int errors = 0, ok = 0;
  for (const auto& [seed, is_video] : seeds) {
    for (int round = 0; round < 40; ++round) {
      std::string m = seed;
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<char>(rng() & 0xff);
      if (round % 4 == 0) m.resize(rng() % m.size());
      try {
        const PreprocessedMedia got =
            is_video ? Pre().ProcessVideo(m, {}) : Pre().ProcessImage(m, {});
        CHECK(got.pixel_values.numel() > 0);
        ++ok;
      } catch (const Error&) {
        ++errors;
      }
    }
  }
  MESSAGE("mutations: " << ok << " decoded, " << errors << " refused");
  CHECK(ok + errors == 200);
}
