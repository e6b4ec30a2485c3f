// EXIF Orientation parsing and the eight pixel transforms; see exif_orientation.h.
#include "gateway/media/exif_orientation.h"

#include "gateway/media/byte_order.h"

#include <cstdint>
#include <cstring>
#include <utility>

namespace m3::media {
namespace {

// Orientation from a TIFF structure (the APP1 payload after "Exif\0\0"), or 1.
int OrientationFromTiff(std::string_view t) {
  if (t.size() < 8) return 1;
  const bool little = t.substr(0, 2) == "II";
  if (!little && t.substr(0, 2) != "MM") return 1;
  auto u16 = [&](size_t i) { return little ? LoadLE16(t, i) : LoadBE16(t, i); };
  auto u32 = [&](size_t i) { return little ? LoadLE32(t, i) : LoadBE32(t, i); };
  if (u16(2) != 42) return 1;
  const size_t ifd = u32(4);
  if (ifd + 2 > t.size()) return 1;
  const size_t entries = u16(ifd);
  for (size_t e = 0; e < entries; ++e) {
    const size_t at = ifd + 2 + 12 * e;
    if (at + 12 > t.size()) return 1;
    if (u16(at) != 0x0112) continue;
    // SHORT, count 1: the value sits in the first two bytes of the value field.
    if (u16(at + 2) != 3 || u32(at + 4) != 1) return 1;
    const uint32_t v = u16(at + 8);
    return v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
  }
  return 1;
}

}  // namespace

int ReadTiffExifOrientation(std::string_view tiff) {
  return OrientationFromTiff(tiff);
}

int ReadWebpExifOrientation(std::string_view b) {
  // RIFF "WEBP", then chunks: a fourcc, a little-endian 32-bit size, the payload padded to even.
  if (b.size() < 12 || b.substr(0, 4) != "RIFF" || b.substr(8, 4) != "WEBP") return 1;
  size_t i = 12;
  while (i + 8 <= b.size()) {
    const size_t size = LoadLE32(b, i + 4);
    if (size > b.size() - (i + 8)) return 1;
    if (b.substr(i, 4) == "EXIF") {
      std::string_view tiff = b.substr(i + 8, size);
      if (tiff.substr(0, 6) == std::string_view("Exif\0\0", 6)) tiff.remove_prefix(6);
      return OrientationFromTiff(tiff);
    }
    i += 8 + size + (size & 1);
  }
  return 1;
}

int ReadJpegExifOrientation(std::string_view b) {
  if (b.size() < 4 || LoadU8(b, 0) != 0xFF || LoadU8(b, 1) != 0xD8) return 1;
  size_t i = 2;
  while (i + 4 <= b.size()) {
    if (LoadU8(b, i) != 0xFF) return 1;
    const uint32_t marker = LoadU8(b, i + 1);
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 1;              // scan data: no more headers
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // no length field
      i += 2;
      continue;
    }
    const size_t len = LoadBE16(b, i + 2);
    if (len < 2 || i + 2 + len > b.size()) return 1;
    const std::string_view payload = b.substr(i + 4, len - 2);
    if (marker == 0xE1 && payload.size() >= 6 &&
        payload.substr(0, 6) == std::string_view("Exif\0\0", 6)) {
      return OrientationFromTiff(payload.substr(6));
    }
    i += 2 + len;
  }
  return 1;
}

ImageBuffer ApplyExifOrientation(ImageBuffer in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int64_t w = in.width, h = in.height;
  ImageBuffer out;
  if (OrientationSwapsAxes(orientation)) {
    out.Allocate(h, w, in.order);
  } else {
    out.Allocate(w, h, in.order);
  }
  // Output (x, y) reads input (sx, sy); the cases follow PIL's transposes for each value.
  for (int64_t y = 0; y < out.height; ++y) {
    uint8_t* d = out.row(y);
    for (int64_t x = 0; x < out.width; ++x, d += 3) {
      int64_t sx = x, sy = y;
      switch (orientation) {
        case 2:
          sx = w - 1 - x;
          break;  // mirror left-right
        case 3:
          sx = w - 1 - x;
          sy = h - 1 - y;
          break;  // rotate 180
        case 4:
          sy = h - 1 - y;
          break;  // mirror top-bottom
        case 5:
          sx = y;
          sy = x;
          break;  // transpose
        case 6:
          sx = y;
          sy = h - 1 - x;
          break;  // rotate 90 clockwise
        case 7:
          sx = w - 1 - y;
          sy = h - 1 - x;
          break;  // transverse
        case 8:
          sx = w - 1 - y;
          sy = x;
          break;  // rotate 90 counter-clockwise
      }
      std::memcpy(d, in.row(sy) + 3 * sx, 3);
    }
  }
  return out;
}

}  // namespace m3::media
