// Image format detection by magic bytes and header-only dimension reading, so the pixel limit
// is enforced before any decoder allocates (a 30000x30000 PNG is refused from its IHDR).
#pragma once

#include <cstdint>
#include <string_view>

namespace m3::media {

enum class MediaFormat {
  kUnknown,
  kPng,
  kJpeg,
  kGif,
  kWebp,
  kBmp,
  kTiff,
  kVideoContainer,  // MP4/MOV, Matroska/WebM, AVI, MPEG-TS, FLV, Ogg: a video, not an image
};

std::string_view FormatName(MediaFormat format);
MediaFormat SniffFormat(std::string_view bytes);

struct ImageHeader {
  MediaFormat format = MediaFormat::kUnknown;
  int64_t width = 0;
  int64_t height = 0;
  bool animated = false;  // GIF with several frames / WebP with an ANIM chunk (as far as known)
};

// Parses just enough of the file to know its format and size (for JPEG, also walks the segments
// to the end-of-image marker, since libjpeg decodes a truncated file without an error). Throws
// m3::Error: kInvalidArgument for unknown or truncated/corrupt headers, kTooLarge for sides
// over 2^31 - 1, kUnsupported for video containers and image variants this build cannot
// decode.
ImageHeader ReadImageHeader(std::string_view bytes);

}  // namespace m3::media
