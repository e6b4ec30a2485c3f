// The GPT-2 byte-to-unicode table: every byte maps to one printable code point so byte-level
// BPE vocabularies can be stored as text. Used by the ByteLevel pre-tokenizer and decoder.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace m3::tok {

// UTF-8 text of the code point that stands for byte b.
const std::string& ByteToUnicode(uint8_t b);
// The byte a code point stands for, or -1 when it is not one of the 256 table entries.
int UnicodeToByte(char32_t c);
// Appends the byte-level text of raw bytes `bytes`.
void AppendByteLevel(std::string_view bytes, std::string& out);

}  // namespace m3::tok
