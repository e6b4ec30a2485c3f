// Test helpers for the text area: feeding a streaming parser a text in different chunkings.
#pragma once

#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace m3::test {

// Splits `text` at UTF-8 character boundaries into chunks of 1..max_chars characters.
inline std::vector<std::string> RandomChunks(std::string_view text, std::mt19937& rng,
                                             int max_chars = 4) {
  std::vector<std::string> chunks;
  std::uniform_int_distribution<int> len(1, max_chars);
  size_t i = 0;
  while (i < text.size()) {
    int n = len(rng);
    size_t j = i;
    while (n-- > 0 && j < text.size()) {
      ++j;
      while (j < text.size() && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80) ++j;
    }
    chunks.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return chunks;
}

inline std::vector<std::string> CharChunks(std::string_view text) {
  std::vector<std::string> chunks;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i + 1;
    while (j < text.size() && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80) ++j;
    chunks.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return chunks;
}

}  // namespace m3::test
