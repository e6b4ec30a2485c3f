// Magic-byte media detection (see media_sniffer.h).
#include "gateway/net/media_sniffer.h"

#include <cstdint>

namespace m3::net {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix, size_t at = 0) {
  return s.size() >= at + prefix.size() && s.substr(at, prefix.size()) == prefix;
}

}  // namespace

SniffedFormat SniffMediaFormat(std::string_view b) {
  using K = SniffedFormat::Kind;
  using namespace std::string_view_literals;
  if (StartsWith(b, "\x89PNG\r\n\x1a\n"sv)) return {K::kImage, "png"};
  if (StartsWith(b, "\xff\xd8\xff"sv)) return {K::kImage, "jpeg"};
  if (StartsWith(b, "GIF87a") || StartsWith(b, "GIF89a")) return {K::kImage, "gif"};
  if (StartsWith(b, "RIFF") && StartsWith(b, "WEBP", 8)) {
    // VP8X header with the animation flag: decoded as a video (libwebpdemux), not an image.
    if (StartsWith(b, "VP8X", 12) && b.size() > 20 && (static_cast<uint8_t>(b[20]) & 0x02))
      return {K::kVideo, "webp-animated"};
    return {K::kImage, "webp"};
  }
  if (StartsWith(b, "BM") && b.size() >= 26) return {K::kImage, "bmp"};
  if (StartsWith(b, "II*\0"sv) || StartsWith(b, "MM\0*"sv)) return {K::kImage, "tiff"};
  if (StartsWith(b, "ftyp", 4)) {
    std::string_view brand = b.size() >= 12 ? b.substr(8, 4) : std::string_view();
    if (brand == "avif" || brand == "avis" || brand == "heic" || brand == "heix" ||
        brand == "mif1" || brand == "msf1")
      return {K::kImage, "heif"};
    return {K::kVideo, brand == "qt  " ? "quicktime" : "mp4"};
  }
  if (StartsWith(b, "\x1a\x45\xdf\xa3"sv)) return {K::kVideo, "matroska"};
  if (StartsWith(b, "RIFF") && StartsWith(b, "AVI ", 8)) return {K::kVideo, "avi"};
  if (StartsWith(b, "FLV\x01"sv)) return {K::kVideo, "flv"};
  if (StartsWith(b, "OggS")) return {K::kVideo, "ogg"};
  if (StartsWith(b, "\0\0\x01\xba"sv)) return {K::kVideo, "mpeg-ps"};
  if (b.size() >= 377 && b[0] == 0x47 && b[188] == 0x47 && b[376] == 0x47)
    return {K::kVideo, "mpeg-ts"};
  return {K::kUnknown, "unknown"};
}

}  // namespace m3::net
