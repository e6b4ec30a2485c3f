// PNG decoding with libpng: every colour type and bit depth PNG allows (gray 1/2/4/8/16, RGB
// 8/16, palette 1/2/4/8 with and without tRNS, gray+alpha 8/16, RGBA 8/16), interlaced or not,
// built here from known samples (zlib + CRC32) and checked against the pixels PIL's
// convert("RGB") gives (computed here from the samples) and against the old OpenCV path; the
// eXIf orientation as the OpenCV path read it; the streaming decode + resize equals decoding
// whole then resizing; corrupt data is refused (as OpenCV refused it) and never crashes.
#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gateway/media/bicubic_resampler.h"
#include "gateway/media/exif_orientation.h"
#include "gateway/media/image_decoder.h"
#include "gateway/media/image_header.h"
#include "gateway/media/png_decoder.h"
#include "tests/media/media_test_util.h"

using namespace m3;
using namespace m3::media;
using namespace m3::media::test;

namespace {

constexpr int kGray = 0, kRgb = 2, kPalette = 3, kGrayAlpha = 4, kRgba = 6;

std::string BE32(uint32_t v) {
  return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

std::string Chunk(const std::string& type, const std::string& data, bool bad_crc = false) {
  const std::string body = type + data;
  uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())));
  if (bad_crc) crc ^= 1;
  return BE32(static_cast<uint32_t>(data.size())) + body + BE32(crc);
}

std::string Compress(const std::string& raw) {
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string out(size, '\0');
  REQUIRE(compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                    reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()),
                    6) == Z_OK);
  out.resize(size);
  return out;
}

int Channels(int color_type) {
  switch (color_type) {
    case kRgb:
      return 3;
    case kGrayAlpha:
      return 2;
    case kRgba:
      return 4;
    default:
      return 1;
  }
}

// A picture as PNG samples: w x h x channels values below 2^depth, plus its palette.
struct Samples {
  int w = 0, h = 0, color_type = 0, depth = 8;
  std::vector<uint16_t> v;
  std::vector<uint8_t> palette;  // RGB triples (colour type 3)
  uint16_t at(int x, int y, int c) const {
    return v[(size_t(y) * w + x) * Channels(color_type) + c];
  }
};

Samples MakeSamples(int w, int h, int color_type, int depth, uint32_t seed) {
  Samples s{w, h, color_type, depth, {}, {}};
  const uint32_t max = (1u << depth) - 1;
  uint32_t state = seed;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  const int palette_size = color_type == kPalette ? std::min(1 << depth, 200) : 0;
  for (size_t i = 0; i < size_t(w) * h * Channels(color_type); ++i) {
    uint32_t x = next() % (max + 1);
    // 16-bit gray: half the samples below 256, where PIL's clamp and the high byte differ.
    if (depth == 16 && color_type == kGray && (next() & 1)) x &= 0x1FF;
    if (color_type == kPalette) x %= palette_size;
    s.v.push_back(static_cast<uint16_t>(x));
  }
  for (int i = 0; i < 3 * palette_size; ++i) s.palette.push_back(static_cast<uint8_t>(next()));
  return s;
}

// One packed, filtered (None/Sub/Up in turn) scanline of pixels x0, x0 + dx, ... of row y.
std::string PackRow(const Samples& s, int y, int x0, int dx, int filter, std::string& prior) {
  const int ch = Channels(s.color_type);
  std::string row;
  int bits = 0, acc = 0;
  for (int x = x0; x < s.w; x += dx) {
    for (int c = 0; c < ch; ++c) {
      const uint16_t v = s.at(x, y, c);
      if (s.depth == 16) {
        row += char(v >> 8);
        row += char(v & 0xff);
      } else if (s.depth == 8) {
        row += char(v);
      } else {
        acc = acc << s.depth | v;
        bits += s.depth;
        if (bits == 8) {
          row += char(acc);
          acc = bits = 0;
        }
      }
    }
  }
  if (bits > 0) row += char(acc << (8 - bits));
  const size_t bpp = std::max(1, ch * s.depth / 8);
  std::string out(1, char(filter));
  for (size_t i = 0; i < row.size(); ++i) {
    const uint8_t left = i >= bpp ? uint8_t(row[i - bpp]) : 0;
    const uint8_t up = prior.size() == row.size() ? uint8_t(prior[i]) : 0;
    const uint8_t raw = uint8_t(row[i]);
    out += char(filter == 1 ? uint8_t(raw - left) : filter == 2 ? uint8_t(raw - up) : raw);
  }
  prior = row;
  return out;
}

struct Extras {
  bool interlaced = false;
  bool trns = false;
  std::string before_idat, after_idat;  // whole chunks
};

std::string BuildPng(const Samples& s, const Extras& e = {}) {
  std::string ihdr = BE32(s.w) + BE32(s.h);
  ihdr += char(s.depth);
  ihdr += char(s.color_type);
  ihdr += std::string(2, '\0');
  ihdr += char(e.interlaced ? 1 : 0);
  std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + Chunk("IHDR", ihdr);
  if (s.color_type == kPalette) {
    png += Chunk("PLTE", std::string(s.palette.begin(), s.palette.end()));
  }
  if (e.trns) {
    if (s.color_type == kPalette) {
      std::string alpha;
      for (size_t i = 0; i < s.palette.size() / 3; ++i) alpha += char(i * 37);
      png += Chunk("tRNS", alpha);
    } else if (s.color_type == kGray) {
      png += Chunk("tRNS", std::string("\0", 1) + char(s.at(0, 0, 0) & ((1 << s.depth) - 1)));
    } else if (s.color_type == kRgb) {
      std::string key;
      for (int c = 0; c < 3; ++c) key += std::string{char(s.at(0, 0, c) >> 8), char(s.at(0, 0, c))};
      png += Chunk("tRNS", key);
    }
  }
  png += e.before_idat;
  std::string raw;
  int filter = 0;
  if (!e.interlaced) {
    std::string prior;
    for (int y = 0; y < s.h; ++y) raw += PackRow(s, y, 0, 1, filter++ % 3, prior);
  } else {
    const int x0[] = {0, 4, 0, 2, 0, 1, 0}, dx[] = {8, 8, 4, 4, 2, 2, 1};
    const int y0[] = {0, 0, 4, 0, 2, 0, 1}, dy[] = {8, 8, 8, 4, 4, 2, 2};
    for (int p = 0; p < 7; ++p) {
      if (x0[p] >= s.w) continue;  // an empty pass has no rows at all
      std::string prior;
      for (int y = y0[p]; y < s.h; y += dy[p])
        raw += PackRow(s, y, x0[p], dx[p], filter++ % 3, prior);
    }
  }
  const std::string z = Compress(raw);
  // Two IDAT chunks, as encoders that flush mid-stream write.
  png += Chunk("IDAT", z.substr(0, z.size() / 2)) + Chunk("IDAT", z.substr(z.size() / 2));
  png += e.after_idat;
  return png + Chunk("IEND", "");
}

// What PIL's convert("RGB") gives for the samples, computed from PNG's rules directly.
ImageBuffer Expected(const Samples& s) {
  ImageBuffer out;
  out.Allocate(s.w, s.h, ChannelOrder::kRGB);
  for (int y = 0; y < s.h; ++y) {
    for (int x = 0; x < s.w; ++x) {
      uint8_t* d = out.row(y) + 3 * x;
      switch (s.color_type) {
        case kGray:
        case kGrayAlpha: {
          const uint16_t v = s.at(x, y, 0);
          const int g = s.depth == 16 ? (s.color_type == kGray ? std::min<int>(v, 255) : v >> 8)
                                      : v * 255 / ((1 << s.depth) - 1);
          d[0] = d[1] = d[2] = uint8_t(g);
          break;
        }
        case kPalette:
          for (int c = 0; c < 3; ++c) d[c] = s.palette[3 * s.at(x, y, 0) + c];
          break;
        default:
          for (int c = 0; c < 3; ++c)
            d[c] = uint8_t(s.depth == 16 ? s.at(x, y, c) >> 8 : s.at(x, y, c));
      }
    }
  }
  return out;
}

// Empty where OpenCV refuses the data (DecodeImage turned its exceptions into errors too).
cv::Mat Decode(const std::string& bytes, int flags) {
  try {
    return cv::imdecode(cv::Mat(1, int(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data())),
                        flags);
  } catch (const cv::Exception&) {
    return {};
  }
}

// The path DecodeImage took before libpng: OpenCV's decode (EXIF applied), 16-bit grayscale
// through its own clamp, as RGB; nullopt where OpenCV refused the data.
std::optional<ImageBuffer> OldPath(const std::string& bytes) {
  ImageBuffer out;
  if (bytes.size() > 25 && uint8_t(bytes[24]) == 16 && bytes[25] == 0) {
    const cv::Mat gray = Decode(bytes, cv::IMREAD_ANYDEPTH | cv::IMREAD_GRAYSCALE);
    if (gray.empty()) return std::nullopt;
    REQUIRE(gray.depth() == CV_16U);
    out.Allocate(gray.cols, gray.rows, ChannelOrder::kRGB);
    for (int y = 0; y < gray.rows; ++y) {
      for (int x = 0; x < gray.cols; ++x) {
        uint8_t* d = out.row(y) + 3 * x;
        d[0] = d[1] = d[2] = uint8_t(std::min<int>(gray.at<uint16_t>(y, x), 255));
      }
    }
    return out;
  }
  const cv::Mat bgr = Decode(bytes, cv::IMREAD_COLOR);
  if (bgr.empty()) return std::nullopt;
  return RgbFromBgrMat(bgr);
}

bool Same(const ImageBuffer& a, const ImageBuffer& b) {
  return a.width == b.width && a.height == b.height && a.order == b.order &&
         std::equal(a.pixels.begin(), a.pixels.begin() + a.width * a.height * 3, b.pixels.begin());
}

ImageBuffer Resized(const ImageBuffer& in, int64_t w, int64_t h) {
  ImageBuffer out;
  BicubicResampler(in.width, in.height, w, h).Resize(in, out);
  return out;
}

// DecodePngResized equals DecodePng + Resize for sizes down, up and with one axis unchanged.
void CheckResized(const std::string& png) {
  const ImageBuffer whole = *DecodePng(png);
  const int64_t w = whole.width, h = whole.height;
  const int64_t sizes[][2] = {{std::max<int64_t>(1, w / 2), std::max<int64_t>(1, h / 3)},
                              {w * 2 + 1, h + 7},
                              {w, std::max<int64_t>(1, h / 2)},
                              {w + 5, h},
                              {w, h}};
  for (const auto& s : sizes) {
    INFO("to " << s[0] << "x" << s[1]);
    const std::optional<ImageBuffer> got = DecodePngResized(png, s[0], s[1]);
    REQUIRE(got.has_value());
    CHECK(Same(*got, Resized(whole, s[0], s[1])));
  }
}

struct Type {
  int color_type, depth;
};
const Type kTypes[] = {{kGray, 1},       {kGray, 2},    {kGray, 4},    {kGray, 8},
                       {kGray, 16},      {kRgb, 8},     {kRgb, 16},    {kPalette, 1},
                       {kPalette, 2},    {kPalette, 4}, {kPalette, 8}, {kGrayAlpha, 8},
                       {kGrayAlpha, 16}, {kRgba, 8},    {kRgba, 16}};

// An OpenCV-encoded photo-like RGB picture (several strips), as the gateway usually sees.
std::string EncodedPicture(int w, int h, int channels) {
  cv::Mat m(h, w, channels == 4 ? CV_8UC4 : CV_8UC3);
  uint32_t state = 7;
  for (int y = 0; y < h; ++y) {
    uint8_t* p = m.ptr<uint8_t>(y);
    for (int x = 0; x < w * channels; ++x) {
      state = state * 1664525u + 1013904223u;
      p[x] = uint8_t((x * 3 + y * 5) / 4 + (state >> 29));
    }
  }
  std::vector<uint8_t> buf;
  REQUIRE(cv::imencode(".png", m, buf, {cv::IMWRITE_PNG_COMPRESSION, 3}));
  return std::string(buf.begin(), buf.end());
}

}  // namespace

TEST_CASE("every PNG colour type and bit depth converts like PIL's convert('RGB')") {
  uint32_t seed = 1;
  for (const Type& t : kTypes) {
    for (const bool interlaced : {false, true}) {
      for (const bool trns : {false, true}) {
        if (trns && (t.color_type == kGrayAlpha || t.color_type == kRgba)) continue;
        const Samples s = MakeSamples(37, 23, t.color_type, t.depth, seed++);
        const std::string png = BuildPng(s, {interlaced, trns, "", ""});
        INFO("colour type " << t.color_type << ", depth " << t.depth << ", interlaced "
                            << interlaced << ", tRNS " << trns);
        const std::optional<ImageBuffer> got = DecodePng(png);
        REQUIRE(got.has_value());
        CHECK(got->order == ChannelOrder::kRGB);
        CHECK(Same(*got, Expected(s)));
        const std::optional<ImageBuffer> old = OldPath(png);
        REQUIRE(old.has_value());
        CHECK(Same(*got, *old));
        CHECK(Same(DecodeImage(png, ReadImageHeader(png), MediaLimits{}), *got));
        const PngInfo info = ReadPngInfo(png);
        CHECK(info.width == 37);
        CHECK(info.height == 23);
        CHECK(info.interlaced == interlaced);
        CHECK(info.orientation == 1);
        CheckResized(png);
      }
    }
  }
}

TEST_CASE("interlaced PNGs too small for some Adam7 passes") {
  uint32_t seed = 100;
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{
           {1, 1}, {2, 1}, {1, 2}, {5, 1}, {1, 9}, {3, 3}, {8, 8}, {9, 9}, {17, 4}}) {
    for (const Type& t : {Type{kRgb, 8}, Type{kGray, 1}, Type{kPalette, 2}, Type{kRgba, 16}}) {
      const Samples s = MakeSamples(w, h, t.color_type, t.depth, seed++);
      INFO(w << "x" << h << " colour type " << t.color_type << " depth " << t.depth);
      for (const bool interlaced : {false, true}) {
        const std::string png = BuildPng(s, {interlaced, false, "", ""});
        const std::optional<ImageBuffer> got = DecodePng(png);
        REQUIRE(got.has_value());
        CHECK(Same(*got, Expected(s)));
        CHECK(Same(*got, *OldPath(png)));
        CheckResized(png);
      }
    }
  }
}

TEST_CASE("OpenCV-encoded PNGs: the old path's pixels, streamed resize equals whole + resize") {
  for (const int channels : {3, 4}) {
    const std::string png = EncodedPicture(150, 97, channels);
    const std::optional<ImageBuffer> got = DecodePng(png);
    REQUIRE(got.has_value());
    CHECK(Same(*got, *OldPath(png)));
    CheckResized(png);
    for (const auto& [w, h] : std::vector<std::pair<int, int>>{{56, 28}, {448, 280}, {150, 31}}) {
      CHECK(Same(*DecodePngResized(png, w, h), Resized(*got, w, h)));
    }
  }
}

TEST_CASE("PNG eXIf orientation: applied as the OpenCV path applied it") {
  const Samples s = MakeSamples(13, 7, kRgb, 8, 500);
  const Samples g = MakeSamples(13, 7, kGray, 16, 501);
  for (int o = 1; o <= 8; ++o) {
    for (const bool little : {false, true}) {
      const std::string exif = Chunk("eXIf", OrientationTiff(uint16_t(o), little));
      for (const bool after : {false, true}) {
        INFO("orientation " << o << (little ? " II" : " MM") << (after ? " after" : " before")
                            << " IDAT");
        Extras e;
        (after ? e.after_idat : e.before_idat) = exif;
        for (const Samples* pic : {&s, &g}) {
          const std::string png = BuildPng(*pic, e);
          CHECK(ReadPngExifOrientation(png) == o);
          CHECK(ReadPngInfo(png).orientation == o);
          const ImageBuffer got = *DecodePng(png);
          CHECK(Same(got, *OldPath(png)));
          CHECK(Same(got, ApplyExifOrientation(Expected(*pic), o)));
          CheckResized(png);
        }
      }
    }
  }
  // What libpng keeps (and OpenCV applied): the first valid eXIf before the image data wins;
  // one with a bad CRC or without a TIFF byte order mark is dropped.
  struct Case {
    std::string name;
    Extras extras;
    int orientation;
  };
  const std::string six = Chunk("eXIf", OrientationTiff(6, false));
  const std::string three = Chunk("eXIf", OrientationTiff(3, false));
  const std::vector<Case> cases = {
      {"before and after", {false, false, six, three}, 6},
      {"two before", {false, false, six + three, ""}, 6},
      {"bad CRC", {false, false, Chunk("eXIf", OrientationTiff(6, false), true), ""}, 1},
      {"bad CRC, then a good one",
       {false, false, Chunk("eXIf", OrientationTiff(6, false), true) + three, ""},
       3},
      {"Exif prefix",
       {false, false, Chunk("eXIf", std::string("Exif\0\0", 6) + OrientationTiff(6, false)), ""},
       1},
      {"bad order mark, then after",
       {false, false, Chunk("eXIf", "XX" + OrientationTiff(6, false).substr(2)), three},
       3},
      {"interlaced", {true, false, six, ""}, 6},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string png = BuildPng(s, c.extras);
    CHECK(ReadPngExifOrientation(png) == c.orientation);
    const ImageBuffer got = *DecodePng(png);
    CHECK(Same(got, *OldPath(png)));
    CHECK(Same(got, ApplyExifOrientation(Expected(s), c.orientation)));
    CheckResized(png);
  }
}

TEST_CASE("corrupt or truncated PNGs are refused with kInvalidArgument, as OpenCV refused them") {
  const Samples s = MakeSamples(64, 40, kRgba, 8, 900);
  const std::string good = BuildPng(s);
  const std::string sig("\x89PNG\r\n\x1a\n", 8);
  const std::string ihdr = good.substr(8, 25);
  const size_t idat = good.find("IDAT") - 4;
  std::string raw;
  {
    std::string prior;
    for (int y = 0; y < s.h; ++y) raw += PackRow(s, y, 0, 1, 0, prior);
  }
  const std::string z = Compress(raw);
  std::string bad_adler = z;
  bad_adler.back() ^= 1;
  auto ihdr_of = [](uint32_t w, uint32_t h) {
    return Chunk("IHDR", BE32(w) + BE32(h) + std::string("\x08\x02\0\0\0", 5));
  };
  std::string bad_ihdr_crc = good;
  bad_ihdr_crc[8 + 8 + 13] ^= 1;
  std::string flipped_idat = good;  // bad CRC on the (critical) IDAT
  flipped_idat[idat + 20] ^= 0x40;
  struct Case {
    std::string name, png;
  };
  const std::vector<Case> refused = {
      {"truncated mid-IDAT", good.substr(0, idat + 8 + 30)},
      {"truncated before IEND", good.substr(0, good.size() - 12)},
      {"truncated in IHDR", good.substr(0, 20)},
      {"bad IHDR CRC", bad_ihdr_crc},
      {"bad IDAT CRC", flipped_idat},
      {"bad IEND CRC", good.substr(0, good.size() - 12) + Chunk("IEND", "", true)},
      {"not a zlib stream", sig + ihdr + Chunk("IDAT", std::string(200, 'x')) + Chunk("IEND", "")},
      {"zlib stream cut short",
       sig + ihdr + Chunk("IDAT", z.substr(0, z.size() / 2)) + Chunk("IEND", "")},
      {"bad Adler-32", sig + ihdr + Chunk("IDAT", bad_adler) + Chunk("IEND", "")},
      {"zero width", sig + ihdr_of(0, 40) + Chunk("IDAT", z) + Chunk("IEND", "")},
      {"zero height", sig + ihdr_of(64, 0) + Chunk("IDAT", z) + Chunk("IEND", "")},
      {"100000x100000 claimed, tiny data",
       sig + ihdr_of(100000, 100000) + Chunk("IDAT", z) + Chunk("IEND", "")},
      {"2^31 wide", sig + ihdr_of(0x80000000u, 1) + Chunk("IDAT", z) + Chunk("IEND", "")},
      {"bad bit depth", sig + Chunk("IHDR", BE32(4) + BE32(4) + std::string("\x05\x02\0\0\0", 5)) +
                            Chunk("IDAT", z) + Chunk("IEND", "")},
      {"palette without PLTE",
       sig + Chunk("IHDR", BE32(4) + BE32(4) + std::string("\x08\x03\0\0\0", 5)) +
           Chunk("IDAT", Compress(std::string(20, '\0'))) + Chunk("IEND", "")},
      {"unknown critical chunk",
       sig + ihdr + Chunk("ABCD", "xy") + Chunk("IDAT", z) + Chunk("IEND", "")},
      {"no IDAT", sig + ihdr + Chunk("IEND", "")},
  };
  for (const Case& c : refused) {
    INFO(c.name);
    CHECK_FALSE(OldPath(c.png).has_value());
    std::string message;
    CHECK(ErrorOf([&] { DecodePng(c.png); }, &message) == ErrorCode::kInvalidArgument);
    CHECK(message.rfind("PNG: ", 0) == 0);
    CHECK(ErrorOf([&] { DecodePngResized(c.png, 30, 20); }) == ErrorCode::kInvalidArgument);
  }
  // Accepted by libpng as by OpenCV: damaged ancillary chunks and trailing bytes.
  const std::vector<Case> accepted = {
      {"bad tEXt CRC",
       sig + ihdr + Chunk("tEXt", std::string("a\0b", 3), true) + good.substr(idat)},
      {"trailing garbage", good + "garbage"},
      {"extra zlib data",
       sig + ihdr + Chunk("IDAT", Compress(raw + std::string(9, '\0'))) + Chunk("IEND", "")},
  };
  for (const Case& c : accepted) {
    INFO(c.name);
    const std::optional<ImageBuffer> old = OldPath(c.png);
    REQUIRE(old.has_value());
    CHECK(Same(*DecodePng(c.png), *old));
    CHECK(Same(*DecodePng(c.png), Expected(s)));
    CHECK(Same(*DecodePngResized(c.png, 30, 20), Resized(*old, 30, 20)));
  }
  // Not a PNG at all: for the caller's other decoders.
  CHECK_FALSE(DecodePng("GIF89a....").has_value());
  CHECK_FALSE(DecodePngResized("", 4, 4).has_value());
  // Every prefix of a small picture: refused, never a crash.
  const std::string small = BuildPng(MakeSamples(9, 5, kPalette, 4, 3), {true, true, "", ""});
  for (size_t cut = 0; cut < small.size(); ++cut) {
    INFO("cut at " << cut);
    if (cut < 8) {
      CHECK_FALSE(DecodePng(small.substr(0, cut)).has_value());
    } else {
      CHECK(ErrorOf([&] { DecodePng(small.substr(0, cut)); }) == ErrorCode::kInvalidArgument);
    }
  }
}
