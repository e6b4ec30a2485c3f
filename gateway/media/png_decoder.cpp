// libpng decoding (row API, no transforms) and the conversions to RGB; see png_decoder.h.
// libpng reports fatal errors through its error function, which must not return: it longjmps
// back to the setjmp in the small C-style functions below, which hold nothing with a destructor.
#include "gateway/media/png_decoder.h"

#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gateway/media/bicubic_resampler.h"
#include "gateway/media/byte_order.h"
#include "gateway/media/exif_orientation.h"
#include "shared/error.h"

namespace m3::media {
namespace {

constexpr std::string_view kSignature("\x89PNG\r\n\x1a\n", 8);

// Rows per strip: libpng hands out one row per call; a strip of them (about 180 KB for 3840
// RGB columns) stays in cache between libpng writing it and the resampler reading it.
constexpr int64_t kStripRows = 16;

// deflate's largest expansion: a 258-byte match coded in 2 bits (1-bit length and distance
// codes). A picture whose filtered rows exceed this times its IDAT bytes cannot be complete.
constexpr uint64_t kMaxInflateRatio = 1032;

struct ChunkScan {
  int orientation = 1;
  uint64_t idat_bytes = 0;  // IDAT payload present in the data
  size_t idat_end = 0;      // just past the last IDAT chunk (its CRC included)
};

// Walks the chunk list without decoding anything. Stops quietly at the first malformed chunk:
// libpng reports it when it gets there.
ChunkScan ScanChunks(std::string_view b) {
  ChunkScan scan;
  std::optional<int> before_idat, after_idat;
  bool seen_idat = false;
  size_t at = kSignature.size();
  while (at + 8 <= b.size()) {
    const uint32_t length = LoadBE32(b, at);
    if (length > 0x7FFFFFFFu) break;  // PNG's bound; libpng refuses it
    const std::string_view type = b.substr(at + 4, 4);
    const size_t data = at + 8;
    const bool complete = b.size() - data >= static_cast<size_t>(length) + 4;
    if (type == "IDAT") {
      seen_idat = true;
      scan.idat_bytes += std::min<uint64_t>(length, b.size() - data);
      scan.idat_end = std::min<size_t>(b.size(), data + static_cast<size_t>(length) + 4);
    } else if (type == "IEND") {
      break;
    } else if (type == "eXIf" && complete && length >= 2) {
      // libpng keeps the first eXIf per side of the image data whose CRC holds and whose
      // byte order mark is valid; OpenCV prefers the one before the image data.
      const std::string_view payload = b.substr(data, length);
      const uint32_t crc = static_cast<uint32_t>(
          crc32(crc32(0, reinterpret_cast<const Bytef*>(b.data() + at + 4), 4),
                reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(length)));
      const bool order = payload.substr(0, 2) == "MM" || payload.substr(0, 2) == "II";
      std::optional<int>& slot = seen_idat ? after_idat : before_idat;
      if (crc == LoadBE32(b, data + length) && order && !slot) {
        slot = ReadTiffExifOrientation(payload);
      }
    }
    if (!complete) break;
    at = data + length + 4;
  }
  scan.orientation = before_idat ? *before_idat : after_idat.value_or(1);
  return scan;
}

struct Reader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  png_infop end = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0, offset = 0;
  // Once the last rows are being read, libpng inflates whatever IDAT data follows them to find
  // the end of the zlib stream (png_read_finish_IDAT), and png_read_end reads any further IDAT
  // chunks: a 100x100 picture followed by 16 MB of compressed zeros would inflate 16 GiB. From
  // `finish_from` on, at most `finish_budget` bytes of IDAT (up to `idat_end`) may be read.
  size_t finish_from = SIZE_MAX, idat_end = 0;
  uint64_t finish_budget = 0;
  char message[256] = {};

  explicit Reader(std::string_view bytes);
  ~Reader() { png_destroy_read_struct(&png, &info, &end); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  [[noreturn]] void Fail() const {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("PNG: ") + (message[0] ? message : "corrupt data"));
  }
};

void OnError(png_structp png, png_const_charp message) {
  auto* r = static_cast<Reader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof(r->message), "%s", message);
  png_longjmp(png, 1);
}

// Warnings (an ancillary chunk with a bad CRC, a duplicate eXIf...) do not stop decoding, as
// in the OpenCV path; libpng would print them.
void OnWarning(png_structp, png_const_charp) {}

void OnRead(png_structp png, png_bytep out, size_t n) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (n > r->size - r->offset) png_error(png, "truncated data");
  if (r->offset + n > r->finish_from && r->finish_from < r->idat_end) {
    const size_t end = std::min(r->offset + n, r->idat_end);
    if (end > r->finish_from && end - r->finish_from > r->finish_budget) {
      png_error(png,
                "surplus image data: the IDAT chunks hold more compressed data after the last "
                "row than the picture needs (refused instead of inflating it)");
    }
  }
  std::memcpy(out, r->data + r->offset, n);
  r->offset += n;
}

Reader::Reader(std::string_view bytes)
    : data(reinterpret_cast<const uint8_t*>(bytes.data())), size(bytes.size()) {
  png = png_create_read_struct(PNG_LIBPNG_VER_STRING, this, OnError, OnWarning);
  Require(png != nullptr, ErrorCode::kInternal, "PNG: cannot create a libpng reader");
  info = png_create_info_struct(png);
  end = png_create_info_struct(png);
  Require(info != nullptr && end != nullptr, ErrorCode::kInternal,
          "PNG: cannot create libpng info structures");
  png_set_read_fn(png, this, OnRead);
}

// Reads the chunks before the image data. False (message in r) on a libpng error.
bool ReadHeader(Reader& r) {
  if (setjmp(png_jmpbuf(r.png))) return false;
  png_read_info(r.png, r.info);
  return true;
}

// Called before the last `rows` rows are read: bounds the IDAT input from here on (see Reader).
// Those rows compress to at most about their raw size; the rest covers libpng's read-ahead and
// the end of the zlib stream.
void BeginFinish(Reader& r, size_t row_bytes, int64_t rows) {
  r.finish_from = r.offset;
  r.finish_budget = 2 * static_cast<uint64_t>(rows) * (row_bytes + 1) + 65536;
}

// Reads the next `n` rows (of the current pass, for interlaced pictures) into rows[0..n).
bool ReadRows(Reader& r, uint8_t* const* rows, int64_t n) {
  if (setjmp(png_jmpbuf(r.png))) return false;
  for (int64_t i = 0; i < n; ++i) png_read_row(r.png, rows[i], nullptr);
  return true;
}

// The chunks after the image data, to IEND (their CRCs checked, as the OpenCV path did).
bool ReadEnd(Reader& r) {
  if (setjmp(png_jmpbuf(r.png))) return false;
  png_read_end(r.png, r.end);
  return true;
}

// What the raw rows hold and how they turn into RGB.
struct Format {
  int64_t width = 0, height = 0;
  int color_type = 0, bit_depth = 0;
  bool interlaced = false;
  int orientation = 1;
  size_t row_bytes = 0;  // a full-width raw row
  // PLTE colours; entries past the palette stay black, as libpng pads them.
  std::array<uint8_t, 256 * 3> palette{};

  bool direct() const { return color_type == PNG_COLOR_TYPE_RGB && bit_depth == 8; }
};

Format ReadFormat(Reader& r) {
  if (!ReadHeader(r)) r.Fail();
  Format f;
  f.width = png_get_image_width(r.png, r.info);
  f.height = png_get_image_height(r.png, r.info);
  f.color_type = png_get_color_type(r.png, r.info);
  f.bit_depth = png_get_bit_depth(r.png, r.info);
  f.interlaced = png_get_interlace_type(r.png, r.info) == PNG_INTERLACE_ADAM7;
  f.row_bytes = png_get_rowbytes(r.png, r.info);
  if (f.color_type == PNG_COLOR_TYPE_PALETTE) {
    png_colorp colours = nullptr;
    int count = 0;
    // libpng refuses a palette picture without PLTE before the image data.
    if (png_get_PLTE(r.png, r.info, &colours, &count) != 0) {
      for (int i = 0; i < std::min(count, 256); ++i) {
        f.palette[3 * i] = colours[i].red;
        f.palette[3 * i + 1] = colours[i].green;
        f.palette[3 * i + 2] = colours[i].blue;
      }
    }
  }
  // Filtered rows carry a filter byte each; Adam7 passes add a few partial rows on top.
  const unsigned pixel_bits = png_get_channels(r.png, r.info) * static_cast<unsigned>(f.bit_depth);
  uint64_t filtered = 0;
  if (f.interlaced) {
    for (int pass = 0; pass < 7; ++pass) {
      const uint64_t cols = PNG_PASS_COLS(static_cast<uint64_t>(f.width), pass);
      const uint64_t rows = PNG_PASS_ROWS(static_cast<uint64_t>(f.height), pass);
      if (cols > 0) filtered += rows * (1 + (cols * pixel_bits + 7) / 8);
    }
  } else {
    filtered = static_cast<uint64_t>(f.height) * (1 + f.row_bytes);
  }
  const ChunkScan scan =
      ScanChunks(std::string_view(reinterpret_cast<const char*>(r.data), r.size));
  f.orientation = scan.orientation;
  r.idat_end = scan.idat_end;
  const uint64_t idat = scan.idat_bytes;
  Require(filtered <= idat * kMaxInflateRatio, ErrorCode::kInvalidArgument,
          "PNG: truncated image data: " + std::to_string(idat) + " bytes of IDAT cannot hold a " +
              std::to_string(f.width) + "x" + std::to_string(f.height) + " picture");
  return f;
}

// Raw samples of pixels [0, n) of one row (big-endian 16-bit, MSB-first packed low depths)
// to RGB, with PIL's convert("RGB") rules.
void ConvertRow(const Format& f, const uint8_t* s, int64_t n, uint8_t* d) {
  const int depth = f.bit_depth;
  switch (f.color_type) {
    case PNG_COLOR_TYPE_GRAY:
      if (depth == 16) {
        // PIL's I;16 -> RGB clamps instead of taking the high byte.
        for (int64_t x = 0; x < n; ++x, d += 3) {
          const int v = s[2 * x] << 8 | s[2 * x + 1];
          d[0] = d[1] = d[2] = static_cast<uint8_t>(std::min(v, 255));
        }
      } else if (depth == 8) {
        for (int64_t x = 0; x < n; ++x, d += 3) d[0] = d[1] = d[2] = s[x];
      } else {
        const int per_byte = 8 / depth, mask = (1 << depth) - 1, scale = 255 / mask;
        for (int64_t x = 0; x < n; ++x, d += 3) {
          const int shift = 8 - depth * (1 + static_cast<int>(x % per_byte));
          d[0] = d[1] = d[2] = static_cast<uint8_t>(((s[x / per_byte] >> shift) & mask) * scale);
        }
      }
      return;
    case PNG_COLOR_TYPE_RGB:
      if (depth == 8) {
        std::memcpy(d, s, static_cast<size_t>(3 * n));
      } else {
        for (int64_t x = 0; x < n; ++x, d += 3, s += 6) {
          d[0] = s[0];
          d[1] = s[2];
          d[2] = s[4];
        }
      }
      return;
    case PNG_COLOR_TYPE_PALETTE: {
      const int per_byte = 8 / depth, mask = (1 << depth) - 1;
      for (int64_t x = 0; x < n; ++x, d += 3) {
        const int shift = 8 - depth * (1 + static_cast<int>(x % per_byte));
        std::memcpy(d, &f.palette[3 * ((s[x / per_byte] >> shift) & mask)], 3);
      }
      return;
    }
    case PNG_COLOR_TYPE_GRAY_ALPHA: {
      const int step = depth == 16 ? 4 : 2;  // the gray sample's (high) byte comes first
      for (int64_t x = 0; x < n; ++x, d += 3) d[0] = d[1] = d[2] = s[step * x];
      return;
    }
    case PNG_COLOR_TYPE_RGB_ALPHA: {
      const int sample = depth / 8;
      const int64_t step = 4 * sample;
      for (int64_t x = 0; x < n; ++x, d += 3, s += step) {
        d[0] = s[0];
        d[1] = s[sample];
        d[2] = s[2 * sample];
      }
      return;
    }
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  "PNG: unsupported colour type " + std::to_string(f.color_type));
  }
}

// Reads the next `n` rows of a non-interlaced picture as RGB into dest(0..n), straight when
// the raw rows are RGB already, else through `raw` (kStripRows raw rows).
template <typename Dest>
void ReadRgbRows(Reader& r, const Format& f, std::vector<uint8_t>& raw, int64_t n, Dest&& dest) {
  std::array<uint8_t*, kStripRows> rows{};
  for (int64_t i = 0; i < n; ++i) rows[i] = f.direct() ? dest(i) : raw.data() + i * f.row_bytes;
  if (!ReadRows(r, rows.data(), n)) r.Fail();
  if (!f.direct()) {
    for (int64_t i = 0; i < n; ++i) ConvertRow(f, rows[i], f.width, dest(i));
  }
}

// The Adam7 passes, each row converted and its pixels placed where they belong in `out`.
void DecodeInterlaced(Reader& r, const Format& f, ImageBuffer& out) {
  // libpng may copy a full-width row's bytes out of a pass row: room for one.
  std::vector<uint8_t> raw(f.row_bytes * kStripRows);
  std::vector<uint8_t> rgb(static_cast<size_t>(3 * f.width));
  std::array<uint8_t*, kStripRows> rows{};
  for (int64_t i = 0; i < kStripRows; ++i) rows[i] = raw.data() + i * f.row_bytes;
  int last_pass = 0;
  for (int pass = 0; pass < 7; ++pass) {
    if (PNG_PASS_COLS(f.width, pass) > 0 && PNG_PASS_ROWS(f.height, pass) > 0) last_pass = pass;
  }
  for (int pass = 0; pass < 7; ++pass) {
    const int64_t cols = PNG_PASS_COLS(f.width, pass), pass_rows = PNG_PASS_ROWS(f.height, pass);
    if (cols == 0 || pass_rows == 0) continue;  // libpng skips empty passes too
    const int64_t x0 = PNG_PASS_START_COL(pass), dx = int64_t{1} << PNG_PASS_COL_SHIFT(pass);
    const int64_t y0 = PNG_PASS_START_ROW(pass), dy = int64_t{1} << PNG_PASS_ROW_SHIFT(pass);
    for (int64_t row = 0; row < pass_rows; row += kStripRows) {
      const int64_t n = std::min(kStripRows, pass_rows - row);
      if (pass == last_pass && row + n >= pass_rows) BeginFinish(r, f.row_bytes, n);
      if (!ReadRows(r, rows.data(), n)) r.Fail();
      for (int64_t i = 0; i < n; ++i) {
        ConvertRow(f, rows[i], cols, rgb.data());
        uint8_t* d = out.row(y0 + (row + i) * dy) + 3 * x0;
        for (int64_t x = 0; x < cols; ++x, d += 3 * dx) std::memcpy(d, &rgb[3 * x], 3);
      }
    }
  }
}

bool HasSignature(std::string_view bytes) {
  return bytes.substr(0, kSignature.size()) == kSignature;
}

}  // namespace

int ReadPngExifOrientation(std::string_view bytes) {
  return HasSignature(bytes) ? ScanChunks(bytes).orientation : 1;
}

PngInfo ReadPngInfo(std::string_view bytes) {
  Require(HasSignature(bytes), ErrorCode::kInvalidArgument, "PNG: no PNG signature");
  Reader r(bytes);
  if (!ReadHeader(r)) r.Fail();
  PngInfo info;
  info.width = png_get_image_width(r.png, r.info);
  info.height = png_get_image_height(r.png, r.info);
  info.interlaced = png_get_interlace_type(r.png, r.info) == PNG_INTERLACE_ADAM7;
  info.orientation = ScanChunks(bytes).orientation;
  return info;
}

std::optional<ImageBuffer> DecodePng(std::string_view bytes) {
  if (!HasSignature(bytes)) return std::nullopt;
  Reader r(bytes);
  const Format f = ReadFormat(r);
  ImageBuffer out;
  out.Allocate(f.width, f.height, ChannelOrder::kRGB);
  if (f.interlaced) {
    DecodeInterlaced(r, f, out);
  } else {
    std::vector<uint8_t> raw(f.direct() ? 0 : f.row_bytes * kStripRows);
    for (int64_t y = 0; y < f.height; y += kStripRows) {
      const int64_t n = std::min(kStripRows, f.height - y);
      if (y + n >= f.height) BeginFinish(r, f.row_bytes, n);
      ReadRgbRows(r, f, raw, n, [&](int64_t i) { return out.row(y + i); });
    }
  }
  if (!ReadEnd(r)) r.Fail();
  return ApplyExifOrientation(std::move(out), f.orientation);
}

std::optional<ImageBuffer> DecodePngResized(std::string_view bytes, int64_t out_width,
                                            int64_t out_height) {
  if (!HasSignature(bytes)) return std::nullopt;
  Reader r(bytes);
  const Format f = ReadFormat(r);
  if (f.interlaced || f.orientation != 1) {
    const std::optional<ImageBuffer> upright = DecodePng(bytes);
    ImageBuffer out;
    BicubicResampler(upright->width, upright->height, out_width, out_height).Resize(*upright, out);
    return out;
  }
  const BicubicResampler resampler(f.width, f.height, out_width, out_height);
  ImageBuffer out, strip;
  strip.Allocate(f.width, kStripRows, ChannelOrder::kRGB);
  BicubicResampler::Stream stream(resampler, ChannelOrder::kRGB, out);
  std::vector<uint8_t> raw(f.direct() ? 0 : f.row_bytes * kStripRows);
  for (int64_t y = 0; y < f.height; y += kStripRows) {
    const int64_t n = std::min(kStripRows, f.height - y);
    if (y + n >= f.height) BeginFinish(r, f.row_bytes, n);
    ReadRgbRows(r, f, raw, n, [&](int64_t i) { return strip.row(i); });
    stream.Push(strip, n);
  }
  if (!ReadEnd(r)) r.Fail();
  Require(stream.done(), ErrorCode::kInternal, "PNG: the resampler did not get every row");
  return out;
}

}  // namespace m3::media
