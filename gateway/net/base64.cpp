// Base64 encoding and strict decoding (see base64.h).
#include "gateway/net/base64.h"

#include <array>

#include "shared/error.h"

namespace m3::net {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> MakeDecodeTable() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr auto kDecode = MakeDecodeTable();

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                 (uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                 uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
    if (rest == 2) v |= uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

namespace {

// Checks `text` and, when `out` is given, decodes into it. Returns the decoded size.
size_t Decode(std::string_view text, std::string_view what, std::string* out) {
  auto bad = [&](size_t offset, const std::string& why) {
    throw Error(ErrorCode::kInvalidArgument, "invalid " + std::string(what) + ": " + why +
                                                 " at offset " + std::to_string(offset));
  };
  size_t n = text.size();
  size_t pad = 0;
  while (pad < 2 && n > 0 && text[n - 1] == '=') {
    --n;
    ++pad;
  }
  if (pad > 0 && (n + pad) % 4 != 0) bad(n, "wrong '=' padding");
  if (n % 4 == 1) bad(n, "truncated (length is not a valid base64 length)");
  if (out) out->reserve(n / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  size_t size = 0;
  for (size_t i = 0; i < n; ++i) {
    int8_t v = kDecode[static_cast<unsigned char>(text[i])];
    if (v < 0)
      bad(i, text[i] == '=' ? "'=' before the end" : "character outside the base64 alphabet");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (out) *out += static_cast<char>((acc >> bits) & 0xff);
      ++size;
    }
  }
  return size;
}

}  // namespace

std::string Base64Decode(std::string_view text, std::string_view what) {
  std::string out;
  Decode(text, what, &out);
  return out;
}

size_t Base64Check(std::string_view text, std::string_view what) {
  return Decode(text, what, nullptr);
}

}  // namespace m3::net
