// The counter-based random stream of one request: the uniform number used to sample its n-th
// generated token is a pure function of (seed, n). Nothing else (batch-mates, preemption,
// backend, thread) can change which token a seeded request draws.
#pragma once

#include <cstdint>

#include "engine/runtime/content_hash.h"

namespace m3::engine {

// Uniform double in [0, 1) with 53 random bits for draw `counter` of stream `seed`.
inline double CounterUniform(uint64_t seed, uint64_t counter) {
  // Two dependent mixing rounds so neighbouring seeds and counters decorrelate fully.
  uint64_t x = Mix64(seed ^ 0x6a09e667f3bcc909ULL);
  x = Mix64(x + 0x9e3779b97f4a7c15ULL * (counter + 1));
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

}  // namespace m3::engine
