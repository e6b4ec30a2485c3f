// Unaligned big- and little-endian integer loads from byte strings, shared by the container
// and chunk walkers (image headers, PNG chunks, RIFF chunks, TIFF/EXIF). Callers check bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace m3::media {

inline uint32_t LoadU8(std::string_view b, size_t i) {
  return static_cast<uint8_t>(b[i]);
}
inline uint32_t LoadBE16(std::string_view b, size_t i) {
  return LoadU8(b, i) << 8 | LoadU8(b, i + 1);
}
inline uint32_t LoadLE16(std::string_view b, size_t i) {
  return LoadU8(b, i) | LoadU8(b, i + 1) << 8;
}
inline uint32_t LoadBE32(std::string_view b, size_t i) {
  return LoadBE16(b, i) << 16 | LoadBE16(b, i + 2);
}
inline uint32_t LoadLE32(std::string_view b, size_t i) {
  return LoadLE16(b, i) | LoadLE16(b, i + 2) << 16;
}

}  // namespace m3::media
