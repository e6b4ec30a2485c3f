// Test helpers for the text area: feeding a streaming parser a text in different chunkings.
#pragma once

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/unicode/utf8.h"

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
    while (n-- > 0 && j < text.size()) j = unicode::NextCodePointEnd(text, j);
    chunks.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return chunks;
}

inline std::vector<std::string> CharChunks(std::string_view text) {
  std::vector<std::string> chunks;
  size_t i = 0;
  while (i < text.size()) {
    const size_t j = unicode::NextCodePointEnd(text, i);
    chunks.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return chunks;
}

}  // namespace m3::test
