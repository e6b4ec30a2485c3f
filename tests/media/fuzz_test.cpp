// Deterministic mutation fuzzing of every entry point that sees untrusted media bytes: the
// image header reader, the EXIF reader, MediaPreprocessor::ProcessImage / ProcessVideo, and
// (when gateway/net is built) the data: URI decoder and the /v1/preprocess JSON parser.
// Seeds are small valid files made here (OpenCV encoders, libjpeg, the ffmpeg CLI); each case
// applies a few mutations drawn from a fixed-seed std::mt19937 keyed by (seed, iteration), so
// any failure replays exactly. Every call must succeed or throw m3::Error with a client-error
// code; any other exception, an internal-error code, or a case running past the watchdog is a
// bug. M3_FUZZ_ITERATIONS (cases per seed) raises the count for long runs; M3_FUZZ_ONLY=
// "seed:iteration" replays one case; M3_FUZZ_FIRST skips to a later range of cases;
// M3_FUZZ_SEEDS=png keeps the seeds whose name contains "png"; M3_FUZZ_VERBOSE=1 prints each
// case before it runs; M3_FUZZ_CASE_TIMEOUT_S sets the watchdog.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

// After <cstdio>: jpeglib.h needs FILE.
#include <jpeglib.h>
#include <zlib.h>

#include "gateway/media/exif_orientation.h"
#include "gateway/media/image_header.h"
#include "tests/media/media_test_util.h"

#ifdef M3_FUZZ_NET
#include "gateway/net/api_error.h"
#include "gateway/net/base64.h"
#include "gateway/net/data_uri.h"
#include "gateway/preprocess/preprocess_request.h"
#endif

using namespace m3;
using namespace m3::media;
using namespace m3::media::test;

namespace {

enum class Target { kImage, kVideo, kDataUri, kJson };

struct Seed {
  std::string name;
  std::string bytes;
  Target target;
};

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

const std::string& Dir() {
  static const std::string dir = m3::test::TempDir();
  return dir;
}

std::string Encode(const std::string& ext, const cv::Mat& m, const std::vector<int>& params = {}) {
  std::vector<uint8_t> buf;
  REQUIRE(cv::imencode(ext, m, buf, params));
  return std::string(buf.begin(), buf.end());
}

// A smooth gradient with a little noise: compresses like a photo, not like pure noise.
cv::Mat Picture(int w, int h, int type = CV_8UC3) {
  cv::Mat m(h, w, type);
  std::mt19937 rng(7);
  const int channels = m.channels();
  for (int y = 0; y < h; ++y) {
    uint8_t* row = m.ptr<uint8_t>(y);
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        row[x * channels + c] = static_cast<uint8_t>((x * 5 + y * 3 + c * 60) % 256 + rng() % 8);
      }
    }
  }
  return m;
}

// Runs the ffmpeg CLI writing `name` in the temp dir; in bit-exact mode by default, since
// muxers otherwise write random segment UIDs, and the cases must replay exactly.
std::string FfmpegFile(const std::string& name, const std::vector<std::string>& args,
                       bool bitexact = true) {
  const std::string path = Dir() + "/" + name;
  std::vector<std::string> all = args;
  if (bitexact) {
    for (const char* flag : {"-fflags", "+bitexact", "-flags:v", "+bitexact", "-threads", "1"}) {
      all.push_back(flag);
    }
  }
  all.push_back(path);
  Ffmpeg(all);
  return m3::test::ReadFile(path);
}

std::string Be16(uint32_t v) {
  return {static_cast<char>((v >> 8) & 0xff), static_cast<char>(v & 0xff)};
}
std::string Be32(uint32_t v) {
  return Be16(v >> 16) + Be16(v & 0xffff);
}
std::string Le16(uint32_t v) {
  return {static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff)};
}

std::string PngChunk(const std::string& type, const std::string& data) {
  const std::string body = type + data;
  const uLong crc =
      crc32(0L, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()));
  return Be32(static_cast<uint32_t>(data.size())) + body + Be32(static_cast<uint32_t>(crc));
}

std::string Deflate(const std::string& raw) {
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string out(size, '\0');
  REQUIRE(compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                    reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()),
                    9) == Z_OK);
  out.resize(size);
  return out;
}

// `png` with `chunk` inserted right after IHDR (8-byte signature + 25-byte IHDR chunk).
std::string AfterIhdr(const std::string& png, const std::string& chunk) {
  return png.substr(0, 33) + chunk + png.substr(33);
}

// Pixels of an 8-bit BGR Mat as an ImageBuffer, for ExpectedImage.
ImageBuffer BufferOf(const cv::Mat& bgr) {
  ImageBuffer b;
  b.Allocate(bgr.cols, bgr.rows, ChannelOrder::kBGR);
  for (int y = 0; y < bgr.rows; ++y) std::memcpy(b.row(y), bgr.ptr(y), b.row_bytes());
  return b;
}

// A CMYK JPEG (Adobe convention: inverted ink values, as Photoshop writes them) of one colour.
std::string CmykJpeg(int w, int h, const uint8_t ink[4]) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = 4;
  c.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 98, TRUE);
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row(static_cast<size_t>(w) * 4);
  for (int x = 0; x < w; ++x) {
    for (int k = 0; k < 4; ++k) row[4 * x + k] = static_cast<uint8_t>(255 - ink[k]);
  }
  while (c.next_scanline < c.image_height) {
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  std::string out(reinterpret_cast<char*>(buf), size);
  std::free(buf);
  jpeg_destroy_compress(&c);
  return out;
}

// Offsets of every SOS marker (FF DA) of a JPEG, found by walking its segments.
std::vector<size_t> ScanStarts(const std::string& jpeg) {
  std::vector<size_t> out;
  for (size_t p = jpeg.find("\xFF\xDA"); p != std::string::npos; p = jpeg.find("\xFF\xDA", p + 2)) {
    out.push_back(p);
  }
  return out;
}

// The smallest GIF: a 1x1 frame (two-colour global table) on a logical screen of w x h.
std::string TinyGif(uint16_t w, uint16_t h) {
  return std::string("GIF89a", 6) + Le16(w) + Le16(h) + std::string("\x80\x00\x00", 3) +
         std::string("\xff\x00\x00\x00\x00\xff", 6) +  // red, blue
         std::string("\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00", 10) +
         std::string("\x02\x02\x44\x01\x00", 5) + ";";
}

// A GIF of `frames` 1x1 frames (0.1 s each) on a w x h logical screen.
std::string ManyFrameGif(uint16_t w, uint16_t h, int frames) {
  std::string g = std::string("GIF89a", 6) + Le16(w) + Le16(h) + std::string("\x80\x00\x00", 3) +
                  std::string("\xff\x00\x00\x00\x00\xff", 6);
  for (int i = 0; i < frames; ++i) {
    g += std::string("\x21\xf9\x04\x00\x0a\x00\x00\x00", 8);  // 0.1 s delay
    g += std::string("\x2c", 1) + Le16(static_cast<uint32_t>(i % w)) + Le16(0) + Le16(1) + Le16(1) +
         std::string(1, '\0') + std::string("\x02\x02\x44\x01\x00", 5);
  }
  return g + ";";
}

std::vector<Seed> MakeSeeds() {
  std::vector<Seed> s;
  const cv::Mat pic = Picture(40, 30);
  s.push_back({"png", Encode(".png", pic), Target::kImage});
  cv::Mat gray16(24, 20, CV_16UC1);
  cv::randu(gray16, 0, 65535);
  s.push_back({"png_gray16", Encode(".png", gray16), Target::kImage});
  cv::Mat bgra = Picture(20, 16, CV_8UC4);
  s.push_back({"png_alpha", Encode(".png", bgra), Target::kImage});
  s.push_back({"jpeg", Encode(".jpg", pic, {cv::IMWRITE_JPEG_QUALITY, 80}), Target::kImage});
  s.push_back({"jpeg_progressive",
               Encode(".jpg", pic, {cv::IMWRITE_JPEG_QUALITY, 80, cv::IMWRITE_JPEG_PROGRESSIVE, 1}),
               Target::kImage});
  s.push_back(
      {"jpeg_exif6", WithApp1(Encode(".jpg", pic), OrientationTiff(6, true)), Target::kImage});
  s.push_back(
      {"jpeg_exif8_be", WithApp1(Encode(".jpg", pic), OrientationTiff(8, false)), Target::kImage});
  s.push_back({"webp_lossy", Encode(".webp", pic, {cv::IMWRITE_WEBP_QUALITY, 80}), Target::kImage});
  s.push_back(
      {"webp_lossless", Encode(".webp", pic, {cv::IMWRITE_WEBP_QUALITY, 101}), Target::kImage});
  s.push_back({"bmp", Encode(".bmp", pic), Target::kImage});
  cv::Mat gray(30, 40, CV_8UC1);
  cv::randu(gray, 0, 255);
  s.push_back({"bmp_gray", Encode(".bmp", gray), Target::kImage});
  s.push_back({"jpeg_gray", Encode(".jpg", gray), Target::kImage});
  s.push_back(
      {"jpeg_restart", Encode(".jpg", pic, {cv::IMWRITE_JPEG_RST_INTERVAL, 2}), Target::kImage});
  const uint8_t ink[4] = {30, 200, 90, 10};
  s.push_back({"jpeg_cmyk", CmykJpeg(24, 16, ink), Target::kImage});
  cv::Mat rgb48(16, 20, CV_16UC3);
  cv::randu(rgb48, 0, 65535);
  s.push_back({"png_rgb48", Encode(".png", rgb48), Target::kImage});
  s.push_back({"png_palette",
               FfmpegFile("seed_pal.png", {"-f", "lavfi", "-i", "testsrc2=size=24x16", "-frames:v",
                                           "1", "-pix_fmt", "pal8"}),
               Target::kImage});
  s.push_back(
      {"tiff_lzw", Encode(".tiff", pic, {cv::IMWRITE_TIFF_COMPRESSION, 5}), Target::kImage});
  s.push_back(
      {"webp_alpha", Encode(".webp", bgra, {cv::IMWRITE_WEBP_QUALITY, 101}), Target::kImage});
  s.push_back({"gif_frames", ManyFrameGif(16, 12, 4), Target::kVideo});
  s.push_back({"tiff", Encode(".tiff", pic), Target::kImage});
  const std::string gif =
      FfmpegFile("seed.gif", {"-f", "lavfi", "-i", "testsrc2=size=24x16:rate=5", "-t", "0.6"});
  s.push_back({"gif", gif, Target::kImage});
  s.push_back({"gif_video", gif, Target::kVideo});
  s.push_back({"mp4_h264",
               FfmpegFile("seed.mp4", {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10", "-t",
                                       "0.6", "-c:v", "libx264", "-g", "3", "-pix_fmt", "yuv420p"}),
               Target::kVideo});
  s.push_back({"mkv_mjpeg",
               FfmpegFile("seed.mkv", {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10", "-t",
                                       "0.4", "-c:v", "mjpeg", "-pix_fmt", "yuvj420p"}),
               Target::kVideo});
  s.push_back({"avi_mpeg4",
               FfmpegFile("seed.avi", {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10", "-t",
                                       "0.4", "-c:v", "mpeg4"}),
               Target::kVideo});
  s.push_back({"webm_vp9",
               FfmpegFile("seed.webm", {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10", "-t",
                                        "0.3", "-c:v", "libvpx-vp9", "-deadline", "realtime"}),
               Target::kVideo});
  s.push_back({"mp4_audio_rotated",
               FfmpegFile("seed_rot.mp4",
                          {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10", "-f", "lavfi", "-i",
                           "sine=frequency=440:sample_rate=8000", "-t", "0.5", "-c:v", "libx264",
                           "-c:a", "aac", "-metadata:s:v:0", "rotate=90"}),
               Target::kVideo});
  s.push_back({"ts_h264",
               FfmpegFile("seed.ts", {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10", "-t",
                                      "0.4", "-c:v", "libx264", "-f", "mpegts"}),
               Target::kVideo});
  s.push_back(
      {"mkv_hevc",
       FfmpegFile("seed_hevc.mkv", {"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10", "-t", "0.3",
                                    "-c:v", "libx265", "-x265-params", "log-level=none"}),
       Target::kVideo});
  s.push_back({"webp_anim",
               FfmpegFile("seed_anim.webp", {"-f", "lavfi", "-i", "testsrc2=size=24x16:rate=5",
                                             "-t", "0.6", "-c:v", "libwebp_anim", "-loop", "0"}),
               Target::kVideo});
#ifdef M3_FUZZ_NET
  const std::string small_png = Encode(".png", Picture(12, 10));
  s.push_back({"data_uri_base64", "data:image/png;base64," + net::Base64Encode(small_png),
               Target::kDataUri});
  std::string pct = "data:image/png;name=x.png,";
  for (unsigned char c : small_png) {
    static const char* hex = "0123456789ABCDEF";
    if (std::isalnum(c)) {
      pct += static_cast<char>(c);
    } else {
      pct += '%';
      pct += hex[c >> 4];
      pct += hex[c & 15];
    }
  }
  s.push_back({"data_uri_percent", pct, Target::kDataUri});
  s.push_back({"json_content",
               R"({"content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":)"
               R"("data:image/png;base64,iVBORw0KGgo="}},{"type":"video_url","video_url":)"
               R"("https://example.com/v.mp4"}],"min_pixels":3136,"max_pixels":50176,"fps":2.5,)"
               R"("min_frames":2,"max_frames":8,"all_frames":false,"response_format":"json"})",
               Target::kJson});
  s.push_back({"json_messages",
               R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":)"
               R"("file:///tmp/a.png"}]},{"role":"assistant","content":"ok"}],)"
               R"("response_format":"safetensors"})",
               Target::kJson});
#endif
  return s;
}

// Offsets of length/size fields of the seed's container structure (with their width and byte
// order), so mutations can aim at them instead of hitting them by chance.
struct Field {
  size_t offset;
  int bytes;
  bool big_endian;
};

std::vector<Field> LengthFields(const std::string& b) {
  std::vector<Field> out;
  auto u8 = [&](size_t i) { return static_cast<uint8_t>(b[i]); };
  auto be32 = [&](size_t i) {
    return uint32_t{u8(i)} << 24 | uint32_t{u8(i + 1)} << 16 | uint32_t{u8(i + 2)} << 8 | u8(i + 3);
  };
  auto le32 = [&](size_t i) {
    return uint32_t{u8(i)} | uint32_t{u8(i + 1)} << 8 | uint32_t{u8(i + 2)} << 16 |
           uint32_t{u8(i + 3)} << 24;
  };
  if (b.size() > 8 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) {
    for (size_t p = 8; p + 12 <= b.size() && out.size() < 64;) {
      out.push_back({p, 4, true});
      if (b.compare(p + 4, 4, "IHDR") == 0) {
        out.push_back({p + 8, 4, true});   // width
        out.push_back({p + 12, 4, true});  // height
      }
      p += 12 + size_t{be32(p)};
    }
  } else if (b.size() > 4 && u8(0) == 0xFF && u8(1) == 0xD8) {
    for (size_t p = 2; p + 4 <= b.size() && out.size() < 64;) {
      if (u8(p) != 0xFF) break;
      const uint8_t m = u8(p + 1);
      out.push_back({p + 2, 2, true});
      if (m >= 0xC0 && m <= 0xC2) {
        out.push_back({p + 5, 2, true});  // height
        out.push_back({p + 7, 2, true});  // width
      }
      if (m == 0xDA) break;
      p += 2 + (size_t{u8(p + 2)} << 8 | u8(p + 3));
    }
  } else if (b.size() > 12 && b.compare(0, 4, "RIFF") == 0) {
    out.push_back({4, 4, false});
    for (size_t p = 12; p + 8 <= b.size() && out.size() < 64;) {
      out.push_back({p + 4, 4, false});
      const uint32_t n = le32(p + 4);
      // Descend into LIST/ANMF-like containers by stepping over their type only.
      if (b.compare(p, 4, "LIST") == 0) {
        p += 12;
      } else if (b.compare(p, 4, "ANMF") == 0 || b.compare(p, 4, "VP8X") == 0) {
        out.push_back({p + 8 + 4 + (b.compare(p, 4, "ANMF") == 0 ? 2 : 0), 3, false});
        p += 8 + (b.compare(p, 4, "ANMF") == 0 ? 16 : n + (n & 1));
      } else {
        p += 8 + size_t{n} + (n & 1);
      }
    }
  } else if (b.size() > 8 && b.compare(4, 4, "ftyp") == 0) {
    // ISO BMFF: box size fields, descending into the usual container boxes.
    std::function<void(size_t, size_t)> walk = [&](size_t p, size_t end) {
      while (p + 8 <= end && out.size() < 96) {
        const uint32_t n = be32(p);
        out.push_back({p, 4, true});
        const std::string type = b.substr(p + 4, 4);
        if (n < 8 || p + n > end) return;
        if (type == "moov" || type == "trak" || type == "mdia" || type == "minf" ||
            type == "stbl") {
          walk(p + 8, p + n);
        } else if (type == "stsd" || type == "stsz" || type == "stco" || type == "stts" ||
                   type == "stss" || type == "stsc") {
          out.push_back({p + 12, 4, true});  // entry count / sample size
          if (p + 20 <= end) out.push_back({p + 16, 4, true});
        }
        p += n;
      }
    };
    walk(0, b.size());
  }
  return out;
}

constexpr uint32_t kInteresting[] = {0,          1,          2,          0x7f,       0x80,
                                     0xff,       0x100,      0x7fff,     0x8000,     0xffff,
                                     0x10000,    100000,     0x7fffffff, 0x80000000, 0xfffffffe,
                                     0xffffffff, 0x00ffffff, 0x01000000, 0x3fff,     0x4000};

void WriteInt(std::string& m, size_t at, int bytes, bool big_endian, uint32_t v) {
  for (int i = 0; i < bytes && at + i < m.size(); ++i) {
    const int shift = 8 * (big_endian ? bytes - 1 - i : i);
    m[at + i] = static_cast<char>((v >> shift) & 0xff);
  }
}

// One to a few mutations; `log` gets a short description of each.
std::string Mutate(const std::string& seed, std::mt19937& rng, const std::vector<Seed>& all,
                   std::string& log) {
  std::string m = seed;
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  // Headers matter most: half of the positional mutations land in the first 64 bytes.
  auto offset = [&]() { return rng() % 2 ? pick(std::min<size_t>(m.size(), 64)) : pick(m.size()); };
  const std::vector<Field> fields = LengthFields(seed);
  const int count =
      rng() % 8 == 0 ? 4 + static_cast<int>(rng() % 12) : 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < count && !m.empty(); ++k) {
    switch (rng() % 10) {
      case 0: {
        const size_t at = offset();
        const int bit = static_cast<int>(rng() % 8);
        m[at] = static_cast<char>(m[at] ^ (1 << bit));
        log += "flip@" + std::to_string(at) + ":" + std::to_string(bit) + " ";
        break;
      }
      case 1: {
        const size_t at = offset();
        const uint32_t r = rng() % 3;
        m[at] = static_cast<char>(r == 0 ? 0x00 : r == 1 ? 0xff : rng() & 0xff);
        log += "set@" + std::to_string(at) + " ";
        break;
      }
      case 2: {
        const size_t at = pick(m.size());
        m.resize(at);
        log += "cut@" + std::to_string(at) + " ";
        break;
      }
      case 3: {  // duplicate a chunk
        const size_t at = pick(m.size());
        const size_t len = 1 + pick(std::min<size_t>(m.size() - at, 512));
        const size_t to = pick(m.size() + 1);
        m.insert(to, m.substr(at, len));
        log += "dup@" + std::to_string(at) + "+" + std::to_string(len) + "->" + std::to_string(to) +
               " ";
        break;
      }
      case 4: {  // remove a chunk
        const size_t at = pick(m.size());
        const size_t len = 1 + pick(std::min<size_t>(m.size() - at, 512));
        m.erase(at, len);
        log += "del@" + std::to_string(at) + "+" + std::to_string(len) + " ";
        break;
      }
      case 5:
      case 6: {  // an interesting integer, at a structural length field when the seed has any
        const uint32_t v = kInteresting[pick(std::size(kInteresting))];
        if (!fields.empty() && rng() % 4 != 0) {
          const Field& f = fields[pick(fields.size())];
          WriteInt(m, f.offset, f.bytes, f.big_endian, v);
          log += "field@" + std::to_string(f.offset) + "=" + std::to_string(v) + " ";
        } else {
          const int bytes = rng() % 2 ? 2 : 4;
          const bool be = rng() % 2;
          const size_t at = offset();
          WriteInt(m, at, bytes, be, v);
          log += "int@" + std::to_string(at) + "=" + std::to_string(v) + " ";
        }
        break;
      }
      case 7: {  // random bytes inserted
        const size_t at = pick(m.size() + 1);
        std::string r(1 + pick(16), '\0');
        for (char& c : r) c = static_cast<char>(rng() & 0xff);
        m.insert(at, r);
        log += "ins@" + std::to_string(at) + "+" + std::to_string(r.size()) + " ";
        break;
      }
      case 8: {  // splice with another seed's tail
        const Seed& other = all[pick(all.size())];
        const size_t at = pick(m.size());
        const size_t from = pick(other.bytes.size());
        m = m.substr(0, at) + other.bytes.substr(from);
        log += "splice@" + std::to_string(at) + ":" + other.name + "@" + std::to_string(from) + " ";
        break;
      }
      case 9: {  // a run of bytes overwritten with one value
        const size_t at = offset();
        const size_t len = 1 + pick(std::min<size_t>(m.size() - at, 64));
        std::fill_n(m.begin() + static_cast<ptrdiff_t>(at), len,
                    static_cast<char>(rng() % 2 ? 0xff : 0x00));
        log += "fill@" + std::to_string(at) + "+" + std::to_string(len) + " ";
        break;
      }
    }
  }
  return m;
}

// Aborts the process, naming the case and saving its input, when one case runs too long: a
// hang must be a test failure, not a stuck CI job.
class Watchdog {
 public:
  explicit Watchdog(double seconds) : limit_(seconds), thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Start(const std::string& name, const std::string& input) {
    std::lock_guard<std::mutex> lock(mu_);
    name_ = name;
    input_ = input;
    start_ = std::chrono::steady_clock::now();
    running_ = true;
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
      if (running_ &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() >
              limit_) {
        const std::string path = Dir() + "/hang.bin";
        m3::test::WriteFile(path, input_);
        std::fprintf(stderr, "FUZZ HANG: case %s ran over %.0f s; input saved to %s\n",
                     name_.c_str(), limit_, path.c_str());
        std::fflush(stderr);
        std::abort();
      }
    }
  }
  double limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string name_, input_;
  std::chrono::steady_clock::time_point start_;
  bool running_ = false, done_ = false;
  std::thread thread_;
};

// Client errors the service maps to 400/413/415/422; anything else from bad input is a bug.
bool ClientErrorCode(ErrorCode c) {
  return c == ErrorCode::kInvalidArgument || c == ErrorCode::kTooLarge ||
         c == ErrorCode::kUnsupported || c == ErrorCode::kUnprocessable;
}

MediaLimits SmallLimits() {
  MediaLimits l;
  l.max_image_pixels = 1 << 20;
  l.max_encoded_bytes = 1 << 24;
  l.max_video_seconds = 600;
  l.max_video_frames_decoded = 2000;
  l.max_video_pixels_per_frame = 1 << 20;
  l.decoder_threads = 1;
  return l;
}

const MediaPreprocessor& Limited() {
  static const MediaPreprocessor pre(Processor(), SmallLimits());
  return pre;
}

void CheckResult(const PreprocessedMedia& got) {
  REQUIRE(got.pixel_values.shape().size() == 2);
  CHECK(got.pixel_values.shape()[0] == got.grid_thw[0] * got.grid_thw[1] * got.grid_thw[2]);
  CHECK(got.grid_thw[0] >= 1);
  CHECK(got.placeholder_tokens > 0);
}

struct Stats {
  int64_t cases = 0, ok = 0, refused = 0, failures = 0;
  double slowest = 0;
  std::string slowest_case;
};

// Runs `f`; a non-m3::Error exception or a non-client error code is recorded as a failure
// with the input saved for replay.
bool g_verbose = false;  // M3_FUZZ_VERBOSE: every call's outcome on stderr

void RunCase(const std::string& name, const std::string& input, Stats& stats,
             const std::function<void()>& f, bool must_succeed = false) {
  std::string problem;
  try {
    f();
    ++stats.ok;
    if (g_verbose) std::fprintf(stderr, "outcome %s ok\n", name.c_str());
  } catch (const Error& e) {
    if (g_verbose) std::fprintf(stderr, "outcome %s refused: %s\n", name.c_str(), e.what());
    if (must_succeed) {
      problem = "a valid seed was refused: " + std::string(e.what());
    } else if (ClientErrorCode(e.code())) {
      ++stats.refused;
    } else {
      problem = "m3::Error with code " + std::string(ErrorCodeName(e.code())) + ": " + e.what();
    }
  } catch (const std::exception& e) {
    problem = std::string("non-m3 exception: ") + e.what();
  } catch (...) {
    problem = "unknown exception";
  }
  if (!problem.empty()) {
    ++stats.failures;
    std::string file = name;
    std::replace(file.begin(), file.end(), ':', '_');
    std::replace(file.begin(), file.end(), '/', '_');
    const std::string path = Dir() + "/fail_" + file + ".bin";
    m3::test::WriteFile(path, input);
    FAIL_CHECK("case " << name << ": " << problem << " (input saved to " << path << ")");
  }
}

}  // namespace

TEST_CASE("fuzz: mutated media never escapes as anything but a client m3::Error") {
  const std::vector<Seed> seeds = MakeSeeds();
  const MediaPreprocessor pre(Processor(), SmallLimits());
  // Per-seed cases: videos cost more to open than images.
  const int64_t iterations = EnvInt("M3_FUZZ_ITERATIONS", 0);
  const bool verbose = EnvInt("M3_FUZZ_VERBOSE", 0) != 0;
  g_verbose = verbose;
  const char* only_env = std::getenv("M3_FUZZ_ONLY");
  const std::string only = only_env ? only_env : "";
  const char* filter_env = std::getenv("M3_FUZZ_SEEDS");  // only seeds whose name contains it
  const std::string seed_filter = filter_env ? filter_env : "";
  Watchdog watchdog(static_cast<double>(EnvInt("M3_FUZZ_CASE_TIMEOUT_S", 60)));
  MediaOptions small;
  small.max_pixels = 56 * 56 * 4;
  small.min_pixels = 56 * 56;
  MediaOptions all_frames = small;
  all_frames.all_frames = true;

  Stats stats;
  for (size_t si = 0; si < seeds.size(); ++si) {
    const Seed& seed = seeds[si];
    if (!seed_filter.empty() && seed.name.find(seed_filter) == std::string::npos) continue;
    int64_t n = iterations;
    if (n <= 0) {
      n = seed.target == Target::kVideo ? 600 : seed.target == Target::kImage ? 1600 : 6000;
    }
    // The unmutated seed first: it must work. M3_FUZZ_FIRST starts the mutated cases later, so
    // long runs can be split into disjoint ranges.
    const int64_t first = EnvInt("M3_FUZZ_FIRST", 0);
    for (int64_t it = -1; it < first + n; ++it) {
      if (it >= 0 && it < first) continue;
      const std::string name = seed.name + ":" + std::to_string(it);
      if (!only.empty() && only != name) continue;
      std::mt19937 rng(static_cast<uint32_t>(si * 7919 + 1) * 2654435761u ^
                       static_cast<uint32_t>(it + 17));
      std::string log;
      const std::string input = it < 0 ? seed.bytes : Mutate(seed.bytes, rng, seeds, log);
      if (verbose) std::fprintf(stderr, "case %s %s\n", name.c_str(), log.c_str());
      if (!only.empty()) m3::test::WriteFile(Dir() + "/case.bin", input);  // for replay
      ++stats.cases;
      const auto start = std::chrono::steady_clock::now();
      watchdog.Start(name, input);
      const bool seed_case = it < 0;  // the unmutated seed must be accepted
      switch (seed.target) {
        case Target::kImage:
          RunCase(
              name + "/header", input, stats,
              [&] {
                const ImageHeader h = ReadImageHeader(input);
                CHECK(h.width > 0);
                CHECK(h.height > 0);
              },
              seed_case);
          RunCase(
              name + "/exif", input, stats,
              [&] {
                const int o = ReadJpegExifOrientation(input);
                CHECK((o >= 1 && o <= 8));
              },
              seed_case);
          RunCase(
              name + "/image", input, stats,
              [&] { CheckResult(pre.ProcessImage(input, it % 8 == 0 ? MediaOptions{} : small)); },
              seed_case);
          if (it % 8 == 3) {
            RunCase(name + "/as_video", input, stats,
                    [&] { CheckResult(pre.ProcessVideo(input, small)); });
          }
          break;
        case Target::kVideo:
          RunCase(
              name + "/video", input, stats,
              [&] { CheckResult(pre.ProcessVideo(input, it % 4 == 0 ? all_frames : small)); },
              seed_case);
          if (it % 8 == 5) {
            RunCase(name + "/as_image", input, stats,
                    [&] { CheckResult(pre.ProcessImage(input, small)); });
          }
          break;
        case Target::kDataUri:
#ifdef M3_FUZZ_NET
          RunCase(
              name + "/data_uri", input, stats,
              [&] {
                const net::DataUri d = net::ParseDataUri(input, 1 << 16);
                CHECK(d.bytes.size() <= size_t{1} << 16);
                if (it % 4 == 0) CheckResult(pre.ProcessImage(d.bytes, small));
              },
              seed_case);
#endif
          break;
        case Target::kJson:
#ifdef M3_FUZZ_NET
          RunCase(
              name + "/json", input, stats,
              [&] {
                const preprocess::PreprocessRequest r = preprocess::ParsePreprocessRequest(input);
                CHECK(!r.items.empty());
              },
              seed_case);
#endif
          break;
      }
      watchdog.Stop();
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (secs > stats.slowest) {
        stats.slowest = secs;
        stats.slowest_case = name + " " + log;
      }
    }
  }
  MESSAGE("fuzz: " << stats.cases << " cases, " << stats.ok << " calls succeeded, " << stats.refused
                   << " refused with a client error, " << stats.failures
                   << " failures; slowest case " << stats.slowest << " s (" << stats.slowest_case
                   << ")");
  CHECK(stats.failures == 0);
}

// ---------------------------------------------------------------------------------------------
// Named cases: hostile shapes of each format, each with the outcome it must have.

TEST_CASE("regression: PNG width x height overflowing int64 is refused from the header") {
  // Found by the fuzzer (png_gray16:130): IHDR 0x8000FFFF x 0xFFFFFFFF made width * height
  // wrap negative, pass the pixel limit, and reach a std::length_error in the allocation.
  std::string png = Encode(".png", Picture(8, 8));
  png.replace(16, 8, Be32(0x8000ffff) + Be32(0xffffffff));
  std::string msg;
  CHECK(ErrorOf([&] { ReadImageHeader(png); }, &msg) == ErrorCode::kTooLarge);
  CHECK(ErrorOf([&] { Pre().ProcessImage(png, {}); }) == ErrorCode::kTooLarge);
  png.replace(16, 8, Be32(0xffffffff) + Be32(0xffffffff));
  CHECK(ErrorOf([&] { Pre().ProcessImage(png, {}); }) == ErrorCode::kTooLarge);
  // TIFF's 32-bit size tags likewise.
  std::string tiff = Encode(".tiff", Picture(8, 8));
  const ImageHeader ok = ReadImageHeader(tiff);
  CHECK(ok.width == 8);
}

TEST_CASE("named: PNG with huge compressed iCCP / zTXt chunks decodes the pixels") {
  const cv::Mat pic = Picture(40, 30);
  const std::string png = Encode(".png", pic);
  const HostTensor want = ExpectedImage(BufferOf(pic));
  // 64 MiB of zeros compress to about 64 KB: a decompression bomb in an ancillary chunk.
  const std::string bomb = Deflate(std::string(64 << 20, '\0'));
  const std::string ztxt = PngChunk("zTXt", std::string("Comment\0\0", 9) + bomb);
  const std::string iccp = PngChunk("iCCP", std::string("icc\0\0", 5) + bomb);
  for (const std::string& chunk : {ztxt, iccp}) {
    CAPTURE(chunk.substr(4, 4));
    const PreprocessedMedia got = Pre().ProcessImage(AfterIhdr(png, chunk), {});
    CHECK(MaxAbsDiff(got.pixel_values, want) == 0.0);
  }
  // A stored (uncompressed) 1 MB zTXt body is just skipped too.
  const PreprocessedMedia got = Pre().ProcessImage(
      AfterIhdr(png,
                PngChunk("tEXt", "Comment" + std::string(1, '\0') + std::string(1 << 20, 'a'))),
      {});
  CHECK(MaxAbsDiff(got.pixel_values, want) == 0.0);
}

TEST_CASE("named: JPEG with thousands of markers, a maximal APP1, an APP1 past the end") {
  const cv::Mat pic = Picture(48, 32);
  const std::string jpeg = Encode(".jpg", pic, {cv::IMWRITE_JPEG_QUALITY, 90});
  const PreprocessedMedia base = Pre().ProcessImage(jpeg, {});
  // 5000 COM and 5000 non-EXIF APP1 segments, and a run of fill bytes, before the frame.
  std::string many;
  for (int i = 0; i < 5000; ++i) many += std::string("\xFF\xFE\x00\x04hi", 6);
  for (int i = 0; i < 5000; ++i) many += std::string("\xFF\xE1\x00\x06XMP\0", 8);
  const std::string crowded =
      jpeg.substr(0, 2) + many + std::string(10000, '\xFF') + jpeg.substr(2);
  CHECK(ReadImageHeader(crowded).width == 48);
  CHECK(ReadJpegExifOrientation(crowded) == 1);
  CHECK(MaxAbsDiff(Pre().ProcessImage(crowded, {}).pixel_values, base.pixel_values) == 0.0);

  // The largest APP1 a segment can hold (65535 bytes of length): an EXIF block padded to fill
  // it, its orientation (6) honoured.
  std::string tiff = OrientationTiff(6, true);
  tiff += std::string(65535 - 2 - 6 - tiff.size(), '\0');
  const std::string big = WithApp1(jpeg, tiff);
  CHECK(ReadJpegExifOrientation(big) == 6);
  const PreprocessedMedia rotated = Pre().ProcessImage(big, {});
  CHECK(rotated.grid_thw[1] > rotated.grid_thw[2]);  // 48x32 turned upright: taller than wide
  // An EXIF block of 70000 bytes does not fit a segment: its length field wraps. The segment
  // then ends inside the TIFF body; the file is refused or decoded, never misread.
  std::string huge_tiff = OrientationTiff(3, false) + std::string(70000, 'x');
  const std::string wrapped = WithApp1(jpeg, huge_tiff);
  const int o = ReadJpegExifOrientation(wrapped);
  CHECK((o >= 1 && o <= 8));
  try {
    Pre().ProcessImage(wrapped, {});
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }
  // An APP1 whose length runs past the end of the file.
  const std::string past = jpeg.substr(0, 2) + std::string("\xFF\xE1\xFF\xFF", 4) + "Exif" +
                           std::string(2, '\0') + OrientationTiff(6, true);
  CHECK(ReadJpegExifOrientation(past) == 1);
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessImage(past, {}); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("JPEG") != std::string::npos);
}

TEST_CASE("named: progressive JPEG truncated mid-scan is refused, never decoded to gray") {
  const std::string jpeg = Encode(".jpg", Picture(120, 90),
                                  {cv::IMWRITE_JPEG_QUALITY, 85, cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  const std::vector<size_t> scans = ScanStarts(jpeg);
  REQUIRE(scans.size() >= 3);
  CHECK_NOTHROW(Pre().ProcessImage(jpeg, {}));
  // Cuts inside the first scan, between scans, inside the last scan, and 2 bytes short of EOI.
  std::vector<size_t> cuts = {scans[0] + 20,     (scans[0] + scans[1]) / 2,
                              scans[1] + 4,      (scans[scans.size() - 2] + scans.back()) / 2,
                              scans.back() + 30, jpeg.size() - 2};
  for (size_t cut : cuts) {
    CAPTURE(cut);
    std::string msg;
    CHECK(ErrorOf([&] { Pre().ProcessImage(jpeg.substr(0, cut), {}); }, &msg) ==
          ErrorCode::kInvalidArgument);
    CHECK(msg.find("JPEG") != std::string::npos);
  }
}

TEST_CASE("named: CMYK JPEG decodes to the right colours") {
  // Ink (C, M, Y, K) -> PIL's RGB: (255 - C)(255 - K) / 255 per channel pair.
  struct Case {
    uint8_t ink[4];
    uint8_t rgb[3];
  };
  const Case cases[] = {{{0, 255, 255, 0}, {255, 0, 0}},
                        {{255, 0, 255, 0}, {0, 255, 0}},
                        {{0, 0, 0, 0}, {255, 255, 255}},
                        {{0, 0, 0, 255}, {0, 0, 0}},
                        {{0, 255, 255, 128}, {127, 0, 0}}};
  for (const Case& c : cases) {
    CAPTURE(int(c.ink[0]));
    CAPTURE(int(c.ink[3]));
    const std::string jpeg = CmykJpeg(64, 48, c.ink);
    const PreprocessedMedia got = Pre().ProcessImage(jpeg, {});
    ImageBuffer want_pixels;
    want_pixels.Allocate(64, 48, ChannelOrder::kRGB);
    for (int64_t i = 0; i < 64 * 48; ++i) std::memcpy(want_pixels.pixels.data() + 3 * i, c.rgb, 3);
    // Within 3 levels (JPEG rounding and the 8-bit CMYK conversion): 3 / 255 / std < 0.05.
    CHECK(MaxAbsDiff(got.pixel_values, ExpectedImage(want_pixels)) < 0.05);
  }
}

TEST_CASE("named: GIF with a huge logical screen and a 1x1 frame") {
  // 65535 x 65535 is over the pixel limit: refused from the header.
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessImage(TinyGif(65535, 65535), {}); }, &msg) ==
        ErrorCode::kTooLarge);
  CHECK(msg.find("65535x65535") != std::string::npos);
  CHECK(ErrorOf([&] { Pre().ProcessVideo(TinyGif(65535, 65535), {}); }, &msg) ==
        ErrorCode::kTooLarge);
  CHECK(msg.find("65535x65535") != std::string::npos);
  // Under the limit: decoded at the screen's size (as PIL does), the frame at the corner.
  const PreprocessedMedia got = Limited().ProcessImage(TinyGif(1000, 800), {});
  CHECK(got.grid_thw[0] == 1);
  CHECK(got.grid_thw[1] * 1000 / 800 == doctest::Approx(got.grid_thw[2]).epsilon(0.1));
  // And the 1x1 screen itself.
  CHECK_NOTHROW(Pre().ProcessImage(TinyGif(1, 1), {}));
}

TEST_CASE("named: TIFF with 300 pages decodes the first page") {
  std::vector<cv::Mat> pages;
  for (int i = 0; i < 300; ++i)
    pages.push_back(cv::Mat(24, 32, CV_8UC3, cv::Scalar(i % 256, 7, 200)));
  pages[0] = Picture(32, 24);
  const std::string path = Dir() + "/pages.tiff";
  REQUIRE(cv::imwritemulti(path, pages));
  const std::string tiff = m3::test::ReadFile(path);
  const PreprocessedMedia got = Pre().ProcessImage(tiff, {});
  CHECK(MaxAbsDiff(got.pixel_values, ExpectedImage(BufferOf(pages[0]))) == 0.0);
}

TEST_CASE("named: videos of zero duration, one frame, and claimed sizes 0x0 / 100000x100000") {
  MediaOptions all;
  all.all_frames = true;
  // One frame, in several containers.
  for (const std::string ext : {"mp4", "mkv", "avi", "webm"}) {
    CAPTURE(ext);
    const std::string v = FfmpegFile(
        "one." + ext, {"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-frames:v", "1"});
    const PreprocessedMedia got = Pre().ProcessVideo(v, {});
    CHECK(got.timestamps.size() == 1);
    CHECK(got.grid_thw[0] == 1);
    CHECK(Pre().ProcessVideo(v, all).timestamps.size() == 1);
  }
  // No frame at all: a clear error.
  const std::string empty =
      FfmpegFile("none.mkv", {"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-t", "0"});
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessVideo(empty, {}); }, &msg) == ErrorCode::kInvalidArgument);
  // Matroska whose Duration element says 0: the length comes from the packets instead.
  std::string mkv = FfmpegFile("zero.mkv", {"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25",
                                            "-frames:v", "3", "-c:v", "mjpeg"});
  const size_t dur = mkv.find("\x44\x89\x88");  // Duration, 8-byte float
  REQUIRE(dur != std::string::npos);
  mkv.replace(dur + 3, 8, std::string(8, '\0'));
  const PreprocessedMedia zero = Pre().ProcessVideo(mkv, all);
  CHECK(zero.timestamps.size() == 3);

  // AVI whose headers claim another frame size. Raw video has no size of its own: the claim
  // is all there is, so 0x0 and 100000x100000 are refused. MJPEG frames carry their size, so
  // the claim is corrected from the bitstream, or refused.
  for (const std::string codec : {"rawvideo", "mjpeg"}) {
    CAPTURE(codec);
    const std::string avi =
        FfmpegFile("claim_" + codec + ".avi",
                   {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10", "-t", "0.5", "-c:v", codec,
                    "-pix_fmt", codec == "rawvideo" ? "bgr24" : "yuvj420p"});
    for (uint32_t side : {0u, 100000u}) {
      CAPTURE(side);
      std::string m = avi;
      auto le32 = [](uint32_t v) {
        return std::string{static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff),
                           static_cast<char>((v >> 16) & 0xff), static_cast<char>(v >> 24)};
      };
      const size_t avih = m.find("avih");
      REQUIRE(avih != std::string::npos);
      m.replace(avih + 8 + 32, 8, le32(side) + le32(side));
      const size_t strf = m.find("strf");
      REQUIRE(strf != std::string::npos);
      m.replace(strf + 8 + 4, 8, le32(side) + le32(side));
      try {
        const PreprocessedMedia got = Pre().ProcessVideo(m, {});
        CHECK(codec == "mjpeg");  // decoded at the bitstream's real size
        CHECK(got.grid_thw[1] * 32 == doctest::Approx(got.grid_thw[2] * 24).epsilon(0.2));
      } catch (const Error& e) {
        // FFmpeg drops a size it cannot accept, so both claims read as "no usable size".
        CHECK(e.code() == ErrorCode::kInvalidArgument);
        CHECK(std::string(e.what()).find("frame size") != std::string::npos);
      }
    }
  }
}

TEST_CASE("regression: a truncated JPEG with FF D9 bytes before the cut is refused") {
  // The old check looked for FF D9 anywhere after the first FF DA, so an FF D9 inside a comment
  // between scans, or an EXIF thumbnail (a whole JPEG, with its own SOS and EOI, inside APP1),
  // let a file cut mid-scan through, and libjpeg decoded it with the missing rows gray.
  const std::string jpeg = Encode(".jpg", Picture(120, 90),
                                  {cv::IMWRITE_JPEG_QUALITY, 85, cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  const std::vector<size_t> scans = ScanStarts(jpeg);
  REQUIRE(scans.size() >= 3);
  const std::string com = std::string("\xFF\xFE\x00\x06", 4) + std::string("\xFF\xD9xy", 4);
  const std::string planted =
      jpeg.substr(0, scans[1]) + com + jpeg.substr(scans[1], scans[2] + 40 - scans[1]);
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessImage(planted, {}); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("truncated") != std::string::npos);

  const std::string thumbnail = Encode(".jpg", Picture(16, 12));
  const std::string with_thumb = WithApp1(jpeg, OrientationTiff(1, true) + thumbnail);
  CHECK_NOTHROW(Pre().ProcessImage(with_thumb, {}));
  const std::vector<size_t> main_scans = ScanStarts(with_thumb);
  const std::string cut = with_thumb.substr(0, main_scans.back() - 100);
  CHECK(ErrorOf([&] { Pre().ProcessImage(cut, {}); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("truncated") != std::string::npos);
  // Baseline too.
  const std::string base =
      WithApp1(Encode(".jpg", Picture(120, 90)), OrientationTiff(1, true) + thumbnail);
  CHECK(ErrorOf([&] { Pre().ProcessImage(base.substr(0, base.size() - 300), {}); }) ==
        ErrorCode::kInvalidArgument);
}

// A progressive JPEG cut mid-scan with an EOI appended is structurally complete: libjpeg only
// warns ("premature end of data segment") and leaves the missing refinements at zero, and the
// reference (PIL) decodes it the same way without an error (it refuses the cut file only when
// the EOI is missing too, as we do above). So it decodes, like the reference.
TEST_CASE("named: progressive JPEG cut mid-scan with an EOI appended decodes like PIL") {
  const std::string jpeg = Encode(".jpg", Picture(120, 90),
                                  {cv::IMWRITE_JPEG_QUALITY, 85, cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  const std::vector<size_t> scans = ScanStarts(jpeg);
  REQUIRE(scans.size() >= 3);
  const std::string eoi = jpeg.substr(0, scans[2] + 40) + "\xFF\xD9";
  const PreprocessedMedia m = Pre().ProcessImage(eoi, {});
  CHECK(m.grid_thw == Pre().ProcessImage(jpeg, {}).grid_thw);
}

TEST_CASE("named: request options cannot ask for unbounded output") {
  const std::string png = Encode(".png", Picture(40, 30));
  MediaOptions o;
  o.min_pixels = int64_t{1} << 40;
  o.max_pixels = int64_t{1} << 40;
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessImage(png, o); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("min_pixels") != std::string::npos);
  o.min_pixels.reset();
  CHECK(ErrorOf([&] { Pre().ProcessImage(png, o); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("max_pixels") != std::string::npos);
  // Every frame of a 300-frame video at 768 tokens each is over the total pixel budget (the
  // reference spreads it over the frames; min_pixels overrides that).
  const std::string mp4 =
      FfmpegFile("many.mp4", {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=100", "-t", "3",
                              "-c:v", "libx264", "-g", "300"});
  MediaOptions v;
  v.all_frames = true;
  v.min_pixels = 768 * 28 * 28;
  v.max_pixels = 768 * 28 * 28;
  CHECK(ErrorOf([&] { Pre().ProcessVideo(mp4, v); }, &msg) == ErrorCode::kTooLarge);
  CHECK(msg.find("total budget") != std::string::npos);
  // The same frames at the default size are fine.
  v.min_pixels.reset();
  v.max_pixels.reset();
  CHECK(Pre().ProcessVideo(mp4, v).timestamps.size() == 300);
}

#ifdef M3_FUZZ_NET
TEST_CASE("named: deeply nested JSON request bodies") {
  for (int depth : {1000, 100000}) {
    CAPTURE(depth);
    const std::string arrays = std::string(depth, '[') + std::string(depth, ']');
    CHECK(ErrorOf([&] { preprocess::ParsePreprocessRequest(arrays); }) ==
          ErrorCode::kInvalidArgument);
    std::string objects = R"({"content":)";
    for (int i = 0; i < depth; ++i) objects += R"({"a":)";
    objects += "1" + std::string(depth, '}') + "}";
    CHECK(ErrorOf([&] { preprocess::ParsePreprocessRequest(objects); }) ==
          ErrorCode::kInvalidArgument);
  }
}
#endif

TEST_CASE("regression: an MP4 whose index sends seeks backwards does not loop forever") {
  // Found by the fuzzer (mp4_h264:7881, "flip@2437:4 fill@2302+16 flip@48:0"): the first NAL
  // length corrupted (no frame decodes), the composition offsets (ctts) zeroed and the udta box
  // size broken. Decode's seek to "the keyframe before the next requested time" landed before
  // what it had read, read forward, and seeked again, forever. Seeks now only go forward.
  std::string mp4 = FfmpegFile("seek_loop.mp4",
                               {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10", "-t", "0.6",
                                "-c:v", "libx264", "-g", "3", "-pix_fmt", "yuv420p"},
                               /*bitexact=*/false);  // exactly the bytes the fuzzer found it in
  auto box = [&](const std::string& type) {
    const size_t at = mp4.find(type);
    REQUIRE(at != std::string::npos);
    return at - 4;  // the size field before the type
  };
  const size_t mdat = box("mdat"), ctts = box("ctts"), udta = box("udta");
  mp4[mdat + 8] = static_cast<char>(mp4[mdat + 8] ^ 0x01);
  std::fill_n(mp4.begin() + static_cast<ptrdiff_t>(ctts + 21), 16, '\0');
  mp4[udta] = static_cast<char>(mp4[udta] ^ 0x10);
  Watchdog watchdog(60);
  watchdog.Start("seek_loop", mp4);
  MediaOptions small;
  small.max_pixels = 56 * 56 * 4;
  try {
    CheckResult(Limited().ProcessVideo(mp4, small));
  } catch (const Error& e) {
    CHECK(ClientErrorCode(e.code()));
  }
  watchdog.Stop();
}

namespace {

// An uncompressed 8-bit RGB little-endian TIFF with the given (tag, value) size entries in
// this order (duplicates allowed) and strip data for width x height.
std::string RawTiff(const std::vector<std::pair<uint16_t, uint32_t>>& sizes, int width,
                    int height) {
  auto le16 = [](uint32_t v) { return Le16(v); };
  auto le32 = [](uint32_t v) { return Le16(v & 0xffff) + Le16(v >> 16); };
  std::vector<std::string> entries;
  auto entry = [&](uint16_t tag, uint16_t type, uint32_t count, uint32_t value) {
    const std::string v = type == 3 && count == 1 ? le16(value) + le16(0) : le32(value);
    entries.push_back(le16(tag) + le16(type) + le32(count) + v);
  };
  const uint32_t strip_bytes = static_cast<uint32_t>(width * height * 3);
  for (const auto& [tag, value] : sizes) entry(tag, 4, 1, value);
  const uint32_t n = static_cast<uint32_t>(sizes.size() + 7);
  const uint32_t ifd = 8, after_ifd = ifd + 2 + 12 * n + 4;
  const uint32_t bps_at = after_ifd, strip_at = after_ifd + 6;
  entry(258, 3, 3, bps_at);                         // BitsPerSample 8,8,8
  entry(259, 3, 1, 1);                              // no compression
  entry(262, 3, 1, 2);                              // RGB
  entry(273, 4, 1, strip_at);                       // StripOffsets
  entry(277, 3, 1, 3);                              // SamplesPerPixel
  entry(278, 4, 1, static_cast<uint32_t>(height));  // RowsPerStrip
  entry(279, 4, 1, strip_bytes);                    // StripByteCounts
  std::string out = std::string("II*\0", 4) + le32(ifd) + le16(n);
  for (const std::string& e : entries) out += e;
  out += le32(0) + le16(8) + le16(8) + le16(8);
  for (uint32_t i = 0; i < strip_bytes; ++i) out += static_cast<char>(i * 7);
  return out;
}

}  // namespace

TEST_CASE("regression: TIFF with duplicated size tags is checked at the size libtiff decodes") {
  // The header reader kept the last ImageWidth/ImageLength entry, libtiff keeps the first: a
  // 20000x20000 entry followed by an 8x6 one passed the pixel limit as 8x6 and then had OpenCV
  // allocate (and, with compressed strips, decode) 400 million pixels.
  CHECK_NOTHROW(Pre().ProcessImage(RawTiff({{256, 8}, {257, 6}}, 8, 6), {}));
  const std::string big_first = RawTiff({{256, 20000}, {257, 20000}, {256, 8}, {257, 6}}, 8, 6);
  CHECK(ReadImageHeader(big_first).width == 20000);
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessImage(big_first, {}); }, &msg) == ErrorCode::kTooLarge);
  CHECK(msg.find("20000x20000") != std::string::npos);
  // The other way round libtiff decodes the 8x6 picture, and so do we.
  const std::string small_first = RawTiff({{256, 8}, {257, 6}, {256, 20000}, {257, 20000}}, 8, 6);
  const PreprocessedMedia got = Pre().ProcessImage(small_first, {});
  CHECK(MaxAbsDiff(got.pixel_values,
                   Pre().ProcessImage(RawTiff({{256, 8}, {257, 6}}, 8, 6), {}).pixel_values) ==
        0.0);
}

TEST_CASE("named: animated WebP whose canvas claims 16384x16384") {
  std::string webp =
      FfmpegFile("anim_canvas.webp", {"-f", "lavfi", "-i", "testsrc2=size=24x16:rate=5", "-t",
                                      "0.6", "-c:v", "libwebp_anim", "-loop", "0"});
  REQUIRE(webp.compare(12, 4, "VP8X") == 0);
  // Canvas width-1 and height-1, 24 bits each, after the VP8X flags and reserved bytes.
  webp.replace(24, 6, std::string("\xff\x3f\x00\xff\x3f\x00", 6));
  CHECK(ReadImageHeader(webp).width == 16384);
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessVideo(webp, {}); }, &msg) == ErrorCode::kTooLarge);
  CHECK(msg.find("16384x16384") != std::string::npos);
}

TEST_CASE("named: extreme request fps and max_frames") {
  const std::string mp4 = FfmpegFile("fps.mp4", {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10",
                                                 "-t", "0.6", "-c:v", "libx264"});
  MediaOptions o;
  o.fps = 1e308;  // duration x fps overflowed int64 and sampled min_frames instead of all 6
  o.max_frames = int64_t{1} << 62;
  CHECK(Pre().ProcessVideo(mp4, o).timestamps.size() == 6);
  o.fps = 1e-300;
  CHECK(Pre().ProcessVideo(mp4, o).timestamps.size() == 4);  // min_frames
}

namespace {

int64_t PeakRssBytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t{u.ru_maxrss} * 1024;
}

}  // namespace

TEST_CASE("regression: an AVI INFO chunk declaring 2 GB is refused without allocating it") {
  // Found by the fuzzer (avi_mpeg4:42623): the INFO list's size set to 0xFFFFFFFE and a chunk
  // inside it declaring ~2 GB made FFmpeg's RIFF INFO reader av_mallocz (allocate and clear)
  // 2 GB for a 7 KB file, before failing on the short read.
  std::string avi =
      FfmpegFile("info_bomb.avi",
                 {"-f", "lavfi", "-i", "testsrc2=size=32x24:rate=10", "-t", "0.4", "-c:v", "mpeg4"},
                 /*bitexact=*/false);  // keeps the INFO list (encoder tag)
  const size_t info = avi.find("INFO");
  REQUIRE(info != std::string::npos);
  REQUIRE(avi.compare(info - 8, 4, "LIST") == 0);
  auto le32 = [](uint32_t v) { return Le16(v & 0xffff) + Le16(v >> 16); };
  avi.replace(info - 4, 4, le32(0xfffffffe));
  avi.replace(info + 8, 4, le32(2000000000));  // the first tag chunk's size
  const int64_t before = PeakRssBytes();
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessVideo(avi, {}); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("AVI") != std::string::npos);
  CHECK(PeakRssBytes() - before < (int64_t{256} << 20));
}

#ifdef M3_FUZZ_NET
TEST_CASE("regression: error bodies quoting invalid UTF-8 still serialize") {
  // A request target such as "/\xff" produced "no route for /\xff", and dump() threw on the
  // invalid UTF-8: the 404 became a 500 (and a throw inside an error handler).
  const nlohmann::json body = net::OpenAiErrorBody(404, "no route for /\xff\xfe", "p\xc0\x80", "x");
  std::string text;
  CHECK_NOTHROW(text = body.dump());
  CHECK(text.find("no route for /\xEF\xBF\xBD\xEF\xBF\xBD") != std::string::npos);
  // Valid UTF-8 passes unchanged; random bytes always serialize.
  CHECK(net::OpenAiErrorBody(400, "caf\xc3\xa9 \xf0\x9f\x98\x80", std::nullopt,
                             "x")["error"]["message"] == "caf\xc3\xa9 \xf0\x9f\x98\x80");
  std::mt19937 rng(99);
  for (int i = 0; i < 2000; ++i) {
    std::string m(rng() % 12, '\0');
    for (char& c : m) c = static_cast<char>(rng() & 0xff);
    CHECK_NOTHROW(net::OpenAiErrorBody(400, m, m, "x").dump());
  }
}
#endif

namespace {

// An animated WebP of `frames` copies of `source`'s ANMF chunks on a canvas of w x h.
std::string WebpAnimation(const std::string& source, uint32_t w, uint32_t h, int frames) {
  auto le32 = [](uint32_t v) { return Le16(v & 0xffff) + Le16(v >> 16); };
  auto u32 = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(source[i])) |
           static_cast<uint32_t>(static_cast<uint8_t>(source[i + 1])) << 8 |
           static_cast<uint32_t>(static_cast<uint8_t>(source[i + 2])) << 16 |
           static_cast<uint32_t>(static_cast<uint8_t>(source[i + 3])) << 24;
  };
  std::string head, anim;
  std::vector<std::string> anmf;
  for (size_t p = 12; p + 8 <= source.size();) {
    const uint32_t n = u32(p + 4);
    const std::string chunk = source.substr(p, 8 + n + (n & 1));
    const std::string id = source.substr(p, 4);
    if (id == "VP8X") {
      head = chunk;
      head.replace(8 + 4, 6, le32(w - 1).substr(0, 3) + le32(h - 1).substr(0, 3));
    } else if (id == "ANIM") {
      anim = chunk;
    } else if (id == "ANMF") {
      anmf.push_back(chunk);
    }
    p += 8 + n + (n & 1);
  }
  REQUIRE(!head.empty());
  REQUIRE(!anmf.empty());
  std::string body = "WEBP" + head + anim;
  for (int i = 0; i < frames; ++i) body += anmf[static_cast<size_t>(i) % anmf.size()];
  return "RIFF" + le32(static_cast<uint32_t>(body.size())) + body;
}

}  // namespace

TEST_CASE("named: animated WebP of many tiny frames on a huge canvas is refused up front") {
  // 2000 frames of 24x16 on an 8000x8000 canvas: each frame makes libwebp copy the 256 MB
  // canvas, half a terabyte of copying from a file of a few hundred KB.
  const std::string source =
      FfmpegFile("anim_src.webp", {"-f", "lavfi", "-i", "testsrc2=size=24x16:rate=5", "-t", "0.6",
                                   "-c:v", "libwebp_anim", "-loop", "0"});
  MediaOptions all;
  all.all_frames = true;
  const std::string ok = WebpAnimation(source, 24, 16, 40);
  CHECK(Pre().ProcessVideo(ok, all).timestamps.size() == 40);
  const std::string heavy = WebpAnimation(source, 8000, 8000, 2000);
  CHECK(heavy.size() < 2000 * 1000);
  Watchdog watchdog(60);
  watchdog.Start("webp_canvas_work", heavy);
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessVideo(heavy, {}); }, &msg) == ErrorCode::kTooLarge);
  CHECK(msg.find("decoding budget") != std::string::npos);
  watchdog.Stop();
}

TEST_CASE("named: GIF of many 1x1 frames on a large screen is refused up front") {
  MediaOptions all;
  all.all_frames = true;
  CHECK(Pre().ProcessVideo(ManyFrameGif(64, 48, 30), all).timestamps.size() == 30);
  // 1000 frames of 4000x4000: 16 G pixels to convert and resample (minutes of work) from a
  // 23 KB file.
  const std::string heavy = ManyFrameGif(4000, 4000, 1000);
  CHECK(heavy.size() < 24000);
  Watchdog watchdog(60);
  watchdog.Start("gif_frame_work", heavy);
  std::string msg;
  CHECK(ErrorOf([&] { Pre().ProcessVideo(heavy, all); }, &msg) == ErrorCode::kTooLarge);
  CHECK(msg.find("decoding budget") != std::string::npos);
  watchdog.Stop();
  // Sampled (at most 768 frames by default) it is within the budget only at a smaller size.
  CHECK_NOTHROW(Pre().ProcessVideo(ManyFrameGif(400, 300, 1000), {}));
}
