// Printable excerpts of untrusted bytes (see printable_excerpt.h).
#include "gateway/net/printable_excerpt.h"

namespace m3::net {

std::string PrintableExcerpt(std::string_view s, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return s.size() > max_bytes ? out + "..." : out;
}

}  // namespace m3::net
