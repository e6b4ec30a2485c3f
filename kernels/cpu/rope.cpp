// RoPE tables and the rotate-half application.
#include "kernels/cpu/rope.h"

#include <cmath>

namespace m3::kernels::cpu {

std::vector<float> RopeInverseFrequencies(int64_t dim, double theta) {
  std::vector<float> inv;
  for (int64_t i = 0; i < dim; i += 2) {
    float exponent = static_cast<float>(i) / static_cast<float>(dim);
    inv.push_back(1.0f / std::pow(static_cast<float>(theta), exponent));
  }
  return inv;
}

void RopeCosSin(int64_t position, const std::vector<float>& inv_freq, float* cos, float* sin) {
  size_t half = inv_freq.size();
  for (size_t i = 0; i < half; ++i) {
    float angle = static_cast<float>(position) * inv_freq[i];
    cos[i] = cos[i + half] = static_cast<float>(std::cos(double(angle)));
    sin[i] = sin[i + half] = static_cast<float>(std::sin(double(angle)));
  }
}

void ApplyRotaryHalf(float* x, int64_t heads, int64_t head_dim, int64_t rot, const float* cos,
                     const float* sin) {
  int64_t half = rot / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      float a = v[i], b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i + half] + a * sin[i + half];
    }
  }
}

}  // namespace m3::kernels::cpu
