// Media format detection from magic bytes. The URL extension and the server's Content-Type
// are never trusted: the bytes decide whether something is an image, a video, or neither.
#pragma once

#include <string_view>

namespace m3::net {

struct SniffedFormat {
  enum class Kind { kImage, kVideo, kUnknown } kind = Kind::kUnknown;
  std::string_view name;  // "png", "jpeg", "mp4", "matroska", ...; "unknown"
};

SniffedFormat SniffMediaFormat(std::string_view bytes);

}  // namespace m3::net
