// Byte-level alphabet: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100 upwards in byte order (the convention GPT-2 introduced and `tokenizers` keeps).
#include "gateway/tokenizer/byte_level.h"

#include <unordered_map>

#include "gateway/unicode/utf8.h"

namespace m3::tok {
namespace {

struct Tables {
  std::array<char32_t, 256> code{};
  std::array<std::string, 256> text;
  std::unordered_map<char32_t, int> reverse;
  Tables() {
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      code[b] = printable(b) ? static_cast<char32_t>(b) : next++;
      unicode::AppendUtf8(text[b], code[b]);
      reverse[code[b]] = b;
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

const std::string& ByteToUnicode(uint8_t b) {
  return GetTables().text[b];
}

int UnicodeToByte(char32_t c) {
  const auto& r = GetTables().reverse;
  auto it = r.find(c);
  return it == r.end() ? -1 : it->second;
}

void AppendByteLevel(std::string_view bytes, std::string& out) {
  const auto& t = GetTables();
  for (unsigned char b : bytes) out.append(t.text[b]);
}

}  // namespace m3::tok
