// 64-bit hashing for the runtime's caches: media content hashes (encoder cache keys, the
// placeholder keys of the prefix cache) and the hash chain over KV pages. Not cryptographic:
// a collision would make two different prefixes share KV pages, which is as unlikely as any
// 64-bit collision for honest inputs (2^-64 per pair); an operator who fears adversarial
// collisions across tenants can turn prefix caching off.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/random_stream.h"

namespace m3::engine {

using kernels::Mix64;  // kernels/random_stream.h: the mixer the CUDA sampler shares

// Combines an accumulated hash with one more 64-bit value (order-dependent).
inline uint64_t HashCombine(uint64_t seed, uint64_t value) {
  return Mix64(seed ^ (Mix64(value) + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}

// Hash of a byte range, `seed` distinguishing domains (kind, dtype, grid).
uint64_t HashBytes(const void* data, size_t bytes, uint64_t seed);

}  // namespace m3::engine
