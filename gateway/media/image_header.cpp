// Magic-byte sniffing and header parsers for PNG, JPEG, GIF, WebP, BMP and TIFF. Every read is
// bounds-checked; a header that ends early is a truncated file.
#include "gateway/media/image_header.h"

#include <cstring>
#include <string>

#include "gateway/media/byte_order.h"
#include "shared/error.h"

namespace m3::media {
namespace {

class Reader {
 public:
  explicit Reader(std::string_view b, const char* what) : b_(b), what_(what) {}
  size_t size() const { return b_.size(); }
  bool Has(size_t off, size_t n) const { return off <= b_.size() && n <= b_.size() - off; }
  void Need(size_t off, size_t n) const {
    Require(Has(off, n), ErrorCode::kInvalidArgument,
            std::string(what_) + " header is truncated (file of " + std::to_string(b_.size()) +
                " bytes)");
  }
  uint8_t U8(size_t off) const {
    Need(off, 1);
    return static_cast<uint8_t>(b_[off]);
  }
  uint32_t BE16(size_t off) const {
    Need(off, 2);
    return LoadBE16(b_, off);
  }
  uint32_t BE32(size_t off) const {
    Need(off, 4);
    return LoadBE32(b_, off);
  }
  uint32_t LE16(size_t off) const {
    Need(off, 2);
    return LoadLE16(b_, off);
  }
  uint32_t LE24(size_t off) const { return LE16(off) | (U8(off + 2) << 16); }
  uint32_t LE32(size_t off) const {
    Need(off, 4);
    return LoadLE32(b_, off);
  }
  bool Match(size_t off, std::string_view s) const {
    return Has(off, s.size()) && b_.substr(off, s.size()) == s;
  }

 private:
  std::string_view b_;
  const char* what_;
};

ImageHeader Png(const Reader& r) {
  // Signature (8) then the IHDR chunk: length, "IHDR", width, height (big endian).
  r.Need(8, 25);
  Require(r.Match(12, "IHDR"), ErrorCode::kInvalidArgument, "PNG: first chunk is not IHDR");
  return {MediaFormat::kPng, r.BE32(16), r.BE32(20), false};
}

// Whether the JPEG's segment structure, walked from `pos` (just after the frame header), reaches
// the end-of-image marker. Segments are skipped by their length and entropy-coded data by
// scanning (it stuffs 0xFF as FF 00, so only restart markers and real markers follow an FF),
// so FF D9 bytes inside a comment, an EXIF thumbnail or any other segment do not count: a file
// cut short (an upload that stopped mid-scan) has no EOI on this walk, while libjpeg would
// quietly turn its missing rows gray.
bool JpegReachesEnd(std::string_view b, size_t pos) {
  const size_t n = b.size();
  while (pos < n) {
    // Next marker: an FF run and a code. FF 00 and restarts belong to entropy-coded data; other
    // bytes between segments are skipped as libjpeg does (its "extraneous bytes" warning).
    const void* ff = std::memchr(b.data() + pos, 0xFF, n - pos);
    if (ff == nullptr) return false;
    pos = static_cast<size_t>(static_cast<const char*>(ff) - b.data());
    while (pos < n && LoadU8(b, pos) == 0xFF) ++pos;
    if (pos >= n) return false;
    const uint32_t marker = LoadU8(b, pos++);
    if (marker == 0x00 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) continue;
    if (marker == 0xD9) return true;
    if (pos + 2 > n) return false;
    const size_t len = LoadBE16(b, pos);
    if (len < 2 || len > n - pos) return false;
    pos += len;
  }
  return false;
}

ImageHeader Jpeg(const Reader& r, std::string_view bytes) {
  size_t pos = 2;
  while (true) {
    Require(r.U8(pos) == 0xFF, ErrorCode::kInvalidArgument, "JPEG: corrupt marker sequence");
    while (r.U8(pos) == 0xFF) ++pos;  // fill bytes
    const uint8_t marker = r.U8(pos++);
    if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) continue;  // no payload
    Require(marker != 0xD9 && marker != 0xDA, ErrorCode::kInvalidArgument,
            "JPEG: no frame header before the image data");
    const uint32_t len = r.BE16(pos);
    Require(len >= 2, ErrorCode::kInvalidArgument, "JPEG: bad segment length");
    const bool sof =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (sof) {
      const int64_t h = r.BE16(pos + 3), w = r.BE16(pos + 5);
      Require(h > 0, ErrorCode::kUnsupported, "JPEG: height defined by a DNL marker");
      Require(JpegReachesEnd(bytes, pos + len), ErrorCode::kInvalidArgument,
              "JPEG: truncated image data (the scans end without an end-of-image marker)");
      return {MediaFormat::kJpeg, w, h, false};
    }
    pos += len;
  }
}

// Walks the GIF block structure far enough to see whether a second frame exists.
ImageHeader Gif(const Reader& r) {
  ImageHeader h{MediaFormat::kGif, r.LE16(6), r.LE16(8), false};
  const uint8_t flags = r.U8(10);
  size_t pos = 13 + ((flags & 0x80) ? 3u * (2u << (flags & 7)) : 0u);
  auto skip_sub_blocks = [&](size_t p) -> size_t {
    while (r.Has(p, 1)) {
      const uint8_t n = r.U8(p);
      p += 1 + n;
      if (n == 0) return p;
    }
    return r.size() + 1;
  };
  int frames = 0;
  while (r.Has(pos, 1) && frames < 2) {
    const uint8_t b = r.U8(pos);
    if (b == 0x21) {
      pos = skip_sub_blocks(pos + 2);
    } else if (b == 0x2C) {
      ++frames;
      if (!r.Has(pos, 10)) break;
      const uint8_t f = r.U8(pos + 9);
      pos += 10 + ((f & 0x80) ? 3u * (2u << (f & 7)) : 0u) + 1;  // + LZW minimum code size
      pos = skip_sub_blocks(pos);
    } else {
      break;  // trailer or garbage: the decoder decides
    }
  }
  h.animated = frames > 1;
  return h;
}

ImageHeader Webp(const Reader& r) {
  r.Need(12, 8);
  if (r.Match(12, "VP8 ")) {
    Require(r.U8(23) == 0x9d && r.U8(24) == 0x01 && r.U8(25) == 0x2a, ErrorCode::kInvalidArgument,
            "WebP: bad VP8 start code");
    return {MediaFormat::kWebp, r.LE16(26) & 0x3fff, r.LE16(28) & 0x3fff, false};
  }
  if (r.Match(12, "VP8L")) {
    Require(r.U8(20) == 0x2f, ErrorCode::kInvalidArgument, "WebP: bad VP8L signature");
    const uint32_t bits = r.LE32(21);
    return {MediaFormat::kWebp, (bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1, false};
  }
  if (r.Match(12, "VP8X")) {
    const uint8_t flags = r.U8(20);
    return {MediaFormat::kWebp, int64_t{r.LE24(24)} + 1, int64_t{r.LE24(27)} + 1,
            (flags & 0x02) != 0};
  }
  throw Error(ErrorCode::kInvalidArgument, "WebP: unknown first chunk");
}

ImageHeader Bmp(const Reader& r) {
  const uint32_t dib = r.LE32(14);
  if (dib == 12) return {MediaFormat::kBmp, r.LE16(18), r.LE16(20), false};
  Require(dib >= 16, ErrorCode::kInvalidArgument, "BMP: bad info header size");
  const int64_t w = static_cast<int32_t>(r.LE32(18));
  const int64_t h = static_cast<int32_t>(r.LE32(22));
  return {MediaFormat::kBmp, w, h < 0 ? -h : h, false};
}

ImageHeader Tiff(const Reader& r) {
  const bool le = r.U8(0) == 'I';
  auto u16 = [&](size_t o) { return le ? r.LE16(o) : r.BE16(o); };
  auto u32 = [&](size_t o) { return le ? r.LE32(o) : r.BE32(o); };
  Require(u16(2) == 42, ErrorCode::kUnsupported, "TIFF: BigTIFF is not supported");
  const size_t ifd = u32(4);
  const uint32_t n = u16(ifd);
  int64_t w = -1, h = -1;
  for (uint32_t i = 0; i < n; ++i) {
    const size_t e = ifd + 2 + 12 * size_t{i};
    const uint32_t tag = u16(e), type = u16(e + 2);
    if (tag != 256 && tag != 257) continue;
    // libtiff keeps the first of duplicated tags (and ignores later ones with a warning): the
    // size checked here must be the size it decodes, or a small second entry would let a huge
    // first one past the pixel limit.
    int64_t& side = tag == 256 ? w : h;
    if (side >= 0) continue;
    const int64_t v = type == 3 ? u16(e + 8) : type == 4 ? u32(e + 8) : -1;
    Require(v >= 0, ErrorCode::kInvalidArgument, "TIFF: bad image size tag type");
    side = v;
  }
  Require(w >= 0 && h >= 0, ErrorCode::kInvalidArgument, "TIFF: image size tags missing");
  return {MediaFormat::kTiff, w, h, false};
}

}  // namespace

std::string_view FormatName(MediaFormat f) {
  switch (f) {
    case MediaFormat::kPng:
      return "PNG";
    case MediaFormat::kJpeg:
      return "JPEG";
    case MediaFormat::kGif:
      return "GIF";
    case MediaFormat::kWebp:
      return "WebP";
    case MediaFormat::kBmp:
      return "BMP";
    case MediaFormat::kTiff:
      return "TIFF";
    case MediaFormat::kVideoContainer:
      return "video container";
    case MediaFormat::kUnknown:
      break;
  }
  return "unknown";
}

MediaFormat SniffFormat(std::string_view b) {
  Reader r(b, "media");
  if (r.Match(0, "\x89PNG\r\n\x1a\n")) return MediaFormat::kPng;
  if (r.Match(0, "\xFF\xD8\xFF")) return MediaFormat::kJpeg;
  if (r.Match(0, "GIF87a") || r.Match(0, "GIF89a")) return MediaFormat::kGif;
  if (r.Match(0, "RIFF") && r.Match(8, "WEBP")) return MediaFormat::kWebp;
  if (r.Match(0, "BM") && r.Has(0, 26)) return MediaFormat::kBmp;
  if (r.Match(0, std::string_view("II*\0", 4)) || r.Match(0, std::string_view("MM\0*", 4)) ||
      r.Match(0, std::string_view("II+\0", 4)) || r.Match(0, std::string_view("MM\0+", 4))) {
    return MediaFormat::kTiff;
  }
  if (r.Match(4, "ftyp") || r.Match(0, "\x1a\x45\xdf\xa3") ||
      (r.Match(0, "RIFF") && r.Match(8, "AVI ")) || r.Match(0, "OggS") || r.Match(0, "FLV") ||
      r.Match(0, std::string_view("\0\0\x01\xba", 4)) ||
      (r.Has(0, 189) && b[0] == 0x47 && b[188] == 0x47)) {
    return MediaFormat::kVideoContainer;
  }
  return MediaFormat::kUnknown;
}

ImageHeader ReadImageHeader(std::string_view bytes) {
  Require(!bytes.empty(), ErrorCode::kInvalidArgument, "image is empty (0 bytes)");
  const MediaFormat f = SniffFormat(bytes);
  Reader r(bytes, FormatName(f).data());
  ImageHeader h;
  switch (f) {
    case MediaFormat::kPng:
      h = Png(Reader(bytes, "PNG"));
      break;
    case MediaFormat::kJpeg:
      h = Jpeg(Reader(bytes, "JPEG"), bytes);
      break;
    case MediaFormat::kGif:
      h = Gif(Reader(bytes, "GIF"));
      break;
    case MediaFormat::kWebp:
      h = Webp(Reader(bytes, "WebP"));
      break;
    case MediaFormat::kBmp:
      h = Bmp(Reader(bytes, "BMP"));
      break;
    case MediaFormat::kTiff:
      h = Tiff(Reader(bytes, "TIFF"));
      break;
    case MediaFormat::kVideoContainer:
      if (r.Match(4, "ftypavif") || r.Match(4, "ftypheic") || r.Match(4, "ftypmif1") ||
          r.Match(4, "ftypheix")) {
        throw Error(ErrorCode::kUnsupported, "HEIF/AVIF images are not supported");
      }
      throw Error(ErrorCode::kUnsupported, "the data is a video container, not an image");
    case MediaFormat::kUnknown:
      throw Error(ErrorCode::kInvalidArgument,
                  "not a supported image (PNG, JPEG, GIF, WebP, BMP, TIFF): unrecognised "
                  "leading bytes");
  }
  Require(h.width > 0 && h.height > 0, ErrorCode::kInvalidArgument,
          std::string(FormatName(f)) + ": invalid image size " + std::to_string(h.width) + "x" +
              std::to_string(h.height) + " (zero or negative)");
  // 32-bit fields (PNG, TIFF) can claim up to 4294967295 per side, whose product overflows
  // int64; no decoder here goes past 2^31 - 1 (PNG's own bound), so larger is refused here and
  // width * height stays exact for every later check.
  constexpr int64_t kMaxSide = 0x7fffffff;
  Require(h.width <= kMaxSide && h.height <= kMaxSide, ErrorCode::kTooLarge,
          std::string(FormatName(f)) + " image of " + std::to_string(h.width) + "x" +
              std::to_string(h.height) + " is over the largest supported side of " +
              std::to_string(kMaxSide) + " pixels");
  return h;
}

}  // namespace m3::media
