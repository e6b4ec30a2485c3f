// The 64-bit mixer and the counter-based uniform draw, one definition for host and device code:
// the CUDA sampler must draw exactly the host's numbers (engine/step/counter_rng.h says what
// the stream guarantees), and the runtime's content hashes use the same mixer.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define M3_HOST_DEVICE __host__ __device__
#else
#define M3_HOST_DEVICE
#endif

namespace m3::kernels {

// A strong 64-bit finalizer (xor-shift / multiply rounds): every input bit affects every
// output bit, so chained values stay well spread.
M3_HOST_DEVICE inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Uniform double in [0, 1) with 53 random bits for draw `counter` of stream `seed`.
M3_HOST_DEVICE inline double CounterUniform(uint64_t seed, uint64_t counter) {
  // Two dependent mixing rounds so neighbouring seeds and counters decorrelate fully.
  uint64_t x = Mix64(seed ^ 0x6a09e667f3bcc909ULL);
  x = Mix64(x + 0x9e3779b97f4a7c15ULL * (counter + 1));
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

}  // namespace m3::kernels
