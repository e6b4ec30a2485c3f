// Rotary position embedding, rotate-half convention:
//   x[:rot] = x[:rot] * cos + rotate_half(x[:rot]) * sin, rotate_half(v) = [-v[h:], v[:h]],
// with h = rot / 2; channels past rot pass through. cos/sin hold `rot` values per position,
// laid out as the reference builds them (e.g. [freqs, freqs] for text RoPE).
#pragma once

#include <cstdint>
#include <vector>

namespace m3::kernels::cpu {

// inv_freq[i] = 1 / theta^(2i / dim), i < dim / 2, in float32 as the reference computes it.
std::vector<float> RopeInverseFrequencies(int64_t dim, double theta);

// cos/sin of [pos * inv_freq, pos * inv_freq] (width 2 * inv_freq.size()), angle in float32.
void RopeCosSin(int64_t position, const std::vector<float>& inv_freq, float* cos, float* sin);

// Rotates the first `rot` channels of each of `heads` vectors of `head_dim` starting at x.
void ApplyRotaryHalf(float* x, int64_t heads, int64_t head_dim, int64_t rot, const float* cos,
                     const float* sin);

}  // namespace m3::kernels::cpu
