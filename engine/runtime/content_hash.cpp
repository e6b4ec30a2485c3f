// HashBytes: four independent 64-bit lanes over 32-byte blocks (so long pixel buffers hash at
// memory speed), folded together with the length and the tail.
#include "engine/runtime/content_hash.h"

#include <cstring>

namespace m3::engine {

uint64_t HashBytes(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  constexpr uint64_t kM = 0x9fb21c651e98df25ULL;
  uint64_t lane[4] = {seed ^ 0x243f6a8885a308d3ULL, seed ^ 0x13198a2e03707344ULL,
                      seed ^ 0xa4093822299f31d0ULL, seed ^ 0x082efa98ec4e6c89ULL};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t v;
      std::memcpy(&v, p + i + 8 * k, 8);
      lane[k] = (lane[k] ^ v) * kM;
      lane[k] ^= lane[k] >> 29;
    }
  }
  uint64_t h = Mix64(bytes ^ seed);
  for (uint64_t l : lane) h = HashCombine(h, l);
  for (; i + 8 <= bytes; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    h = HashCombine(h, v);
  }
  if (i < bytes) {
    uint64_t v = 0;
    std::memcpy(&v, p + i, bytes - i);
    h = HashCombine(h, v ^ (static_cast<uint64_t>(bytes - i) << 56));
  }
  return h;
}

}  // namespace m3::engine
