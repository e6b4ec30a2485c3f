// BicubicResampler: the AVX2 and AVX-512 kernels equal the scalar arithmetic bit for bit over many
// size pairs (down, up, one axis unchanged, extreme ratios); streaming in strips of any height
// gives the same pixels; one-axis resizes are symmetric under transposition (portrait and
// landscape alike); SmartResize's rounding rules.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "gateway/media/bicubic_resampler.h"
#include "gateway/media/smart_resize.h"
#include "shared/error.h"

using namespace m3;
using namespace m3::media;

TEST_CASE("SIMD and scalar resampling agree exactly") {
  std::mt19937 rng(7);
  const int sizes[][4] = {
      {53, 37, 56, 28},       {224, 224, 224, 224},   {451, 301, 448, 308}, {1900, 17, 392, 28},
      {1000, 700, 448, 308},  {3, 5, 28, 56},         {640, 480, 640, 252}, {300, 200, 84, 200},
      {97, 1013, 28, 2800},   {1920, 1080, 896, 476}, {29, 31, 1400, 28},   {1920, 1080, 896, 504},
      {3840, 2160, 896, 504}, {960, 540, 896, 504},   {1000, 9, 998, 9},    {62, 40, 29, 31},
      {7, 9, 5, 3},           {4000, 30, 28, 30},     {1001, 3, 333, 7}};
  for (const auto& s : sizes) {
    CAPTURE(s[0]);
    CAPTURE(s[1]);
    CAPTURE(s[2]);
    CAPTURE(s[3]);
    ImageBuffer in;
    in.Allocate(s[0], s[1], ChannelOrder::kRGB);
    for (int64_t i = 0; i < s[0] * s[1] * 3; ++i) in.pixels[i] = static_cast<uint8_t>(rng() % 256);
    // Extremes exercise the clamping.
    for (int64_t i = 0; i < s[0] * s[1] * 3; i += 5) in.pixels[i] = (i / 5) % 2 ? 255 : 0;
    const BicubicResampler r(s[0], s[1], s[2], s[3]);
    ImageBuffer a, b;
    r.Resize(in, a);
    r.ResizeScalar(in, b);
    REQUIRE(a.width == s[2]);
    REQUIRE(a.height == s[3]);
    CHECK(std::memcmp(a.pixels.data(), b.pixels.data(), s[2] * s[3] * 3) == 0);
    // Every kernel this CPU offers, not only the one Resize() prefers.
    for (auto k : {BicubicResampler::Kernel::kAvx2, BicubicResampler::Kernel::kAvx512}) {
      if (!r.Has(k)) continue;
      CAPTURE(static_cast<int>(k));
      ImageBuffer c;
      r.ResizeWith(k, in, c);
      CHECK(std::memcmp(c.pixels.data(), b.pixels.data(), s[2] * s[3] * 3) == 0);
    }
  }
}

// Every media golden is landscape or square; this pins portrait handling without one. When only one
// axis changes, resizing a picture and resizing its transpose run the same 1-D filter over the same
// samples (once as the horizontal pass, once as the vertical one), so the results must be exact
// transposes; a height/width mix-up in either pass or kernel breaks that.
TEST_CASE("one-axis resizes of a picture and of its transpose are exact transposes") {
  std::mt19937 rng(13);
  // in_w, in_h, out_w (width changes only): the chat-e2e portrait's axes (90 -> 84 down,
  // 300 -> 308 up), filters wider than a SIMD step, and a one-pixel-wide strip.
  const int sizes[][3] = {{90, 300, 84},   {300, 90, 308}, {45, 120, 56},
                          {1000, 37, 252}, {17, 1900, 28}, {1, 50, 28}};
  auto transpose = [](const ImageBuffer& in) {
    ImageBuffer t;
    t.Allocate(in.height, in.width, ChannelOrder::kRGB);
    for (int64_t y = 0; y < in.height; ++y)
      for (int64_t x = 0; x < in.width; ++x) std::memcpy(t.row(x) + 3 * y, in.row(y) + 3 * x, 3);
    return t;
  };
  for (const auto& s : sizes) {
    CAPTURE(s[0]);
    CAPTURE(s[1]);
    CAPTURE(s[2]);
    ImageBuffer in;
    in.Allocate(s[0], s[1], ChannelOrder::kRGB);
    for (int64_t i = 0; i < int64_t{s[0]} * s[1] * 3; ++i)
      in.pixels[i] = static_cast<uint8_t>(rng() % 256);
    const ImageBuffer in_t = transpose(in);
    const BicubicResampler across(s[0], s[1], s[2], s[1]), down(s[1], s[0], s[1], s[2]);
    for (auto k : {BicubicResampler::Kernel::kScalar, BicubicResampler::Kernel::kAvx2,
                   BicubicResampler::Kernel::kAvx512}) {
      if (!across.Has(k) || !down.Has(k)) continue;
      CAPTURE(static_cast<int>(k));
      ImageBuffer a, b;
      across.ResizeWith(k, in, a);
      down.ResizeWith(k, in_t, b);
      REQUIRE(b.width == s[1]);
      REQUIRE(b.height == s[2]);
      const ImageBuffer a_t = transpose(a);
      int64_t mismatches = 0;
      for (int64_t y = 0; y < b.height; ++y)
        mismatches += std::memcmp(a_t.row(y), b.row(y), 3 * b.width) != 0;
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("streaming in strips equals resizing the whole image") {
  std::mt19937 rng(11);
  // Downscales (the window slides many times), upscales, one axis or neither unchanged,
  // filters wider than the window slack, and sources with rows no output reads.
  const int sizes[][4] = {{1920, 1080, 896, 504}, {203, 117, 56, 84},  {90, 300, 28, 28},
                          {64, 2000, 64, 28},     {50, 40, 120, 90},   {77, 45, 28, 45},
                          {77, 45, 77, 140},      {33, 20, 33, 20},    {1000, 9, 998, 3},
                          {17, 1900, 28, 392},    {640, 480, 640, 252}};
  for (const auto& s : sizes) {
    CAPTURE(s[0]);
    CAPTURE(s[1]);
    CAPTURE(s[2]);
    CAPTURE(s[3]);
    ImageBuffer in;
    in.Allocate(s[0], s[1], ChannelOrder::kBGR);
    for (int64_t i = 0; i < s[0] * s[1] * 3; ++i) in.pixels[i] = static_cast<uint8_t>(rng() % 256);
    const BicubicResampler r(s[0], s[1], s[2], s[3]);
    ImageBuffer whole;
    r.ResizeScalar(in, whole);
    for (auto k : {BicubicResampler::Kernel::kScalar, BicubicResampler::Kernel::kAvx2,
                   BicubicResampler::Kernel::kAvx512}) {
      if (!r.Has(k)) continue;
      for (const int strip_rows : {1, 7, 16, 100}) {
        CAPTURE(static_cast<int>(k));
        CAPTURE(strip_rows);
        ImageBuffer out, strip;
        strip.Allocate(s[0], strip_rows, ChannelOrder::kBGR);
        BicubicResampler::Stream stream(r, ChannelOrder::kBGR, out, k);
        while (stream.next_row() < s[1]) {
          const int64_t n = std::min<int64_t>(strip_rows, s[1] - stream.next_row());
          std::memcpy(strip.row(0), in.row(stream.next_row()), n * in.row_bytes());
          // Rows past n hold stale data: the stream must not read them.
          std::memset(strip.row(n), 0xAB, (strip_rows - n) * strip.row_bytes());
          stream.Push(strip, n);
        }
        CHECK(stream.done());
        REQUIRE(out.width == s[2]);
        REQUIRE(out.height == s[3]);
        CHECK(out.order == ChannelOrder::kBGR);
        CHECK(std::memcmp(out.pixels.data(), whole.pixels.data(), s[2] * s[3] * 3) == 0);
      }
    }
  }
}

TEST_CASE("a stream refuses strips that do not fit") {
  const BicubicResampler r(40, 30, 20, 15);
  ImageBuffer out, wide, strip;
  wide.Allocate(41, 4, ChannelOrder::kRGB);
  strip.Allocate(40, 4, ChannelOrder::kRGB);
  BicubicResampler::Stream stream(r, ChannelOrder::kRGB, out);
  CHECK_THROWS_AS(stream.Push(wide, 4), Error);
  CHECK_THROWS_AS(stream.Push(strip, 5), Error);
  for (int i = 0; i < 7; ++i) stream.Push(strip, 4);
  CHECK_FALSE(stream.done());
  CHECK_THROWS_AS(stream.Push(strip, 4), Error);  // 32 rows > 30
  stream.Push(strip, 2);
  CHECK(stream.done());
}

TEST_CASE("a constant image stays constant; identity sizes copy") {
  ImageBuffer in;
  in.Allocate(77, 45, ChannelOrder::kBGR);
  for (int64_t i = 0; i < 77 * 45 * 3; ++i) in.pixels[i] = static_cast<uint8_t>(40 + i % 3);
  ImageBuffer out;
  BicubicResampler(77, 45, 28, 140).Resize(in, out);
  CHECK(out.order == ChannelOrder::kBGR);
  for (int64_t i = 0; i < 28 * 140 * 3; ++i) REQUIRE(out.pixels[i] == 40 + i % 3);
  BicubicResampler(77, 45, 77, 45).Resize(in, out);
  CHECK(std::memcmp(out.pixels.data(), in.pixels.data(), 77 * 45 * 3) == 0);
}

TEST_CASE("SmartResize matches the reference's rounding") {
  // round() is half-to-even: 42/28 = 1.5 -> 2, 70/28 = 2.5 -> 2.
  CHECK(SmartResize(42, 70, 28, 56, 1 << 30).height == 56);
  CHECK(SmartResize(42, 70, 28, 56, 1 << 30).width == 56);
  // Shrinking floors, growing ceils.
  const ResizeTarget big = SmartResize(1080, 1920, 28, 3136, 451584);
  CHECK(big.height == 504);  // exactly max_pixels: 504 x 896 = 451584
  CHECK(big.width == 896);
  const ResizeTarget small = SmartResize(37, 53, 28, 3136, 150528);
  CHECK(small.height == 56);
  CHECK(small.width == 84);
  const ResizeTarget thin = SmartResize(17, 1900, 28, 3136, 150528);
  CHECK(thin.height == 28);
  CHECK(thin.width == 1904);
  // A side under half a factor counts as one factor before the pixel checks (the reference's
  // max(factor, round(side / factor) * factor)), in either orientation.
  const ResizeTarget sliver = SmartResize(13, 1000, 28, 3136, 150528);
  CHECK(sliver.height == 28);
  CHECK(sliver.width == 1008);
  const ResizeTarget upright = SmartResize(1000, 10, 28, 3136, 150528);
  CHECK(upright.height == 1008);
  CHECK(upright.width == 28);
  const ResizeTarget line = SmartResize(1, 200, 28, 3136, 150528);
  CHECK(line.height == 28);
  CHECK(line.width == 196);
  // Both sides tiny: still grown to min_pixels.
  const ResizeTarget dot = SmartResize(10, 10, 28, 3136, 150528);
  CHECK(dot.height == 56);
  CHECK(dot.width == 56);
  // Portrait and landscape are mirror images of each other.
  const ResizeTarget tall = SmartResize(300, 90, 28, 3136, 50176);
  CHECK(tall.height == 308);
  CHECK(tall.width == 84);
  const ResizeTarget wide = SmartResize(90, 300, 28, 3136, 50176);
  CHECK(wide.height == 84);
  CHECK(wide.width == 308);
  CHECK_THROWS_AS(SmartResize(1, 201, 28, 3136, 150528), Error);
  CHECK_NOTHROW(SmartResize(1, 200, 28, 3136, 150528));
}
