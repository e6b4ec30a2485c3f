// Media made to cost more than it shows (issue 11 rows 5 and 10): a PNG whose IDAT data goes
// on after the picture, a JPEG whose header claims far more pixels than its data holds, GIFs
// sent as images (their errors are image errors, the video length bound does not apply to
// their first frame), and videos whose container claims an absurd duration.
#include <doctest/doctest.h>
#include <zlib.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "tests/media/media_test_util.h"
#include "tests/test_util.h"

using namespace m3;
using namespace m3::media;
using namespace m3::media::test;

namespace {

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string Chunk(const std::string& type, const std::string& data) {
  const std::string body = type + data;
  const uLong crc =
      crc32(0L, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()));
  return Be32(static_cast<uint32_t>(data.size())) + body + Be32(static_cast<uint32_t>(crc));
}

// A w x h RGB PNG whose single zlib stream holds the filtered rows and then `surplus` zero
// bytes, in IDAT chunks of at most 64 KB.
std::string PngWithSurplus(int w, int h, size_t surplus) {
  std::string raw;
  for (int y = 0; y < h; ++y) {
    raw += '\0';
    for (int x = 0; x < w; ++x) raw += std::string{char(x * 2), char(y * 2), char(x + y)};
  }
  z_stream z{};
  REQUIRE(deflateInit(&z, 1) == Z_OK);
  std::string out;
  std::vector<unsigned char> buf(1 << 16);
  auto pump = [&](const std::string& in, int flush) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    do {
      z.next_out = buf.data();
      z.avail_out = static_cast<uInt>(buf.size());
      deflate(&z, flush);
      out.append(reinterpret_cast<char*>(buf.data()), buf.size() - z.avail_out);
    } while (z.avail_out == 0);
  };
  pump(raw, Z_NO_FLUSH);
  const std::string zeros(1 << 20, '\0');
  for (size_t left = surplus; left > 0;) {
    const size_t n = std::min(left, zeros.size());
    pump(zeros.substr(0, n), Z_NO_FLUSH);
    left -= n;
  }
  pump("", Z_FINISH);
  deflateEnd(&z);
  std::string png = std::string("\x89PNG\r\n\x1a\n", 8) +
                    Chunk("IHDR", Be32(w) + Be32(h) + std::string("\x08\x02\0\0\0", 5));
  for (size_t at = 0; at < out.size(); at += 65536) png += Chunk("IDAT", out.substr(at, 65536));
  return png + Chunk("IEND", "");
}

std::string Encode(const std::string& ext, const cv::Mat& m, const std::vector<int>& params = {}) {
  std::vector<uint8_t> buf;
  REQUIRE(cv::imencode(ext, m, buf, params));
  return std::string(buf.begin(), buf.end());
}

cv::Mat Picture(int w, int h) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(x * 3, y * 3, (x + y) % 256);
  }
  return m;
}

// `jpeg` with the frame header (SOF0/SOF2) claiming width x height.
std::string ForgeJpegSize(std::string jpeg, int width, int height) {
  for (size_t p = 2; p + 9 < jpeg.size();) {
    REQUIRE(static_cast<uint8_t>(jpeg[p]) == 0xFF);
    const uint8_t marker = static_cast<uint8_t>(jpeg[p + 1]);
    if (marker == 0xC0 || marker == 0xC2) {
      jpeg[p + 5] = static_cast<char>(height >> 8);
      jpeg[p + 6] = static_cast<char>(height);
      jpeg[p + 7] = static_cast<char>(width >> 8);
      jpeg[p + 8] = static_cast<char>(width);
      return jpeg;
    }
    p += 2 + (static_cast<size_t>(static_cast<uint8_t>(jpeg[p + 2])) << 8 |
              static_cast<uint8_t>(jpeg[p + 3]));
  }
  FAIL("no frame header");
  return jpeg;
}

}  // namespace

TEST_CASE("PNG: image data past the last row is not inflated (row 5)") {
  // 64 MB of zeros after a 100x100 picture (the file had 16 GiB): refused from the
  // compressed bytes libpng is handed after the last row, long before inflating them.
  const std::string bomb = PngWithSurplus(100, 100, size_t{64} << 20);
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessImage(bomb, {}); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("surplus image data") != std::string::npos);
  // A few bytes of slack (some encoders leave them) still decode, to the same pixels.
  const std::string slack = PngWithSurplus(100, 100, 1000);
  const std::string clean = PngWithSurplus(100, 100, 0);
  const PreprocessedMedia a = Pre().ProcessImage(slack, {});
  const PreprocessedMedia b = Pre().ProcessImage(clean, {});
  CHECK(MaxAbsDiff(a.pixel_values, b.pixel_values) == 0);
}

TEST_CASE("JPEG: a header that claims more pixels than the data holds (row 10)") {
  for (bool progressive : {false, true}) {
    CAPTURE(progressive);
    const std::string small =
        Encode(".jpg", Picture(64, 64),
               {cv::IMWRITE_JPEG_QUALITY, 90, cv::IMWRITE_JPEG_PROGRESSIVE, progressive ? 1 : 0});
    CHECK(Pre().ProcessImage(small, {}).grid_thw[0] == 1);
    const std::string forged = ForgeJpegSize(small, 9000, 9000);
    std::string msg;
    CHECK(ErrorOf([&] { Pre().ProcessImage(forged, {}); }, &msg) == ErrorCode::kInvalidArgument);
    CHECK(msg.find("ends before the declared 9000x9000 picture") != std::string::npos);
  }
}

TEST_CASE("GIF sent as an image: image errors, first frame, no video length bound (row 10)") {
  const std::string dir = m3::test::TempDir();
  Ffmpeg({"-f", "lavfi", "-i", "testsrc=size=32x24:rate=1", "-t", "20", dir + "/long.gif"});
  std::string gif = m3::test::ReadFile(dir + "/long.gif");
  // Every frame shown for 655.35 s: 20 frames are 3.6 hours, over the 3-hour video bound.
  int patched = 0;
  for (size_t p = 0; p + 8 < gif.size(); ++p) {
    if (static_cast<uint8_t>(gif[p]) == 0x21 && static_cast<uint8_t>(gif[p + 1]) == 0xF9 &&
        gif[p + 2] == 4) {
      gif[p + 4] = '\xff';
      gif[p + 5] = '\xff';
      ++patched;
    }
  }
  REQUIRE(patched >= 17);
  // As an image it is its first frame, as PIL opens it.
  CHECK(Pre().ProcessImage(gif, {}).grid_thw[0] == 1);
  // As a video the length bound applies.
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessVideo(gif, {}); }, &msg) == ErrorCode::kTooLarge);
  // A broken GIF's error says GIF, not video.
  const std::string broken = gif.substr(0, 13) + std::string(200, '\x55');
  CHECK(ErrorOf([&] { Pre().ProcessImage(broken, {}); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("GIF") != std::string::npos);
  CHECK(msg.find("video") == std::string::npos);
}

TEST_CASE("video: frames timed past the length bound are refused, not repeated (row 10)") {
  const std::string dir = m3::test::TempDir();
  Ffmpeg({"-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "2", "-pix_fmt", "yuv420p",
          dir + "/v.mp4"});
  const std::string mp4 = m3::test::ReadFile(dir + "/v.mp4");
  CHECK(Pre().ProcessVideo(mp4, {}).timestamps.size() >= 2);
  // The sample table (stts) gives every frame 2^31 ticks while the declared durations stay at
  // 2 s: the frames' own timing claims 4 million seconds.
  std::string forged = mp4;
  const size_t stts = forged.find("stts");
  REQUIRE(stts != std::string::npos);
  forged.replace(stts + 4 + 8 + 4, 4, std::string("\x7f\xff\xff\xff", 4));
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessVideo(forged, {}); }, &msg) == ErrorCode::kTooLarge);
  CHECK(msg.find("past the limit") != std::string::npos);
}
