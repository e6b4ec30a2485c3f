// The dummy-weight draws and block quantization, on the host's threads. Built with
// -ffp-contract=off (kernels/CMakeLists.txt): counter_normal.h's bitwise agreement with the GPU
// needs every product and sum rounded on its own.
#include "kernels/cpu/random_fill.h"

#include <algorithm>
#include <cmath>

#include "kernels/counter_normal.h"
#include "kernels/cpu/float8.h"
#include "kernels/cpu/microscaling.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/microscaling_block.h"

namespace m3::kernels::cpu {

namespace cn = m3::kernels::counter_normal;

namespace {

// Normals [first, first + n) of the stream, first even and n even.
void Normals(uint64_t key, int64_t first, int64_t n, float* z) {
  for (int64_t i = 0; i < n; i += 2)
    CounterNormalPair(key, static_cast<uint64_t>((first + i) / 2), z[i], z[i + 1]);
}

}  // namespace

void RandomNormal(uint64_t seed, float mean, float std, int64_t begin, int64_t n, float* out) {
  const uint64_t key = NormalStreamKey(seed);
  ParallelFor(n, int64_t{1} << 16, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t e = begin + i;
      float z[2];
      CounterNormalPair(key, static_cast<uint64_t>(e / 2), z[0], z[1]);
      out[i] = cn::Add(mean, cn::Mul(std, z[e & 1]));
    }
  });
}

float DummyNvfp4GlobalScale(float std) {
  return std > 0.0f ? cn::Div(cn::Mul(8.0f, std), kE2M1MaxValue * kE4M3MaxValue) : 1.0f;
}

void RandomMxfp8Rows(uint64_t seed, float std, int64_t K, int64_t row_begin, int64_t rows,
                     uint8_t* codes, uint8_t* scales) {
  const uint64_t key = NormalStreamKey(seed);
  const int64_t per_row = K / kMxfp8Block;
  ParallelFor(rows * per_row, 1024, [&](int64_t lo, int64_t hi) {
    float w[kMxfp8Block];
    for (int64_t b = lo; b < hi; ++b) {
      Normals(key, row_begin * K + b * kMxfp8Block, kMxfp8Block, w);
      float amax = 0.0f;
      for (float& x : w) {
        x = cn::Mul(std, x);
        amax = std::max(amax, std::fabs(x));
      }
      const int e = Mxfp8BlockExponent(amax);
      scales[b] = static_cast<uint8_t>(e + 127);
      const float inv = Pow2(-e);
      for (int64_t i = 0; i < kMxfp8Block; ++i)
        codes[b * kMxfp8Block + i] = F32ToE4M3(cn::Mul(w[i], inv));
    }
  });
}

void RandomNvfp4Rows(uint64_t seed, float std, float global, int64_t K, int64_t row_begin,
                     int64_t rows, uint8_t* packed, uint8_t* scales) {
  const uint64_t key = NormalStreamKey(seed);
  const int64_t per_row = K / kNvfp4Block;
  const float block_div = cn::Mul(kE2M1MaxValue, global);
  ParallelFor(rows * per_row, 1024, [&](int64_t lo, int64_t hi) {
    float w[kNvfp4Block];
    for (int64_t b = lo; b < hi; ++b) {
      Normals(key, row_begin * K + b * kNvfp4Block, kNvfp4Block, w);
      float amax = 0.0f;
      for (float& x : w) {
        x = cn::Mul(std, x);
        amax = std::max(amax, std::fabs(x));
      }
      const uint8_t s = F32ToE4M3(cn::Div(amax, block_div));
      scales[b] = s;
      const float step = cn::Mul(E4M3Decode(s), global);
      for (int64_t i = 0; i < kNvfp4Block; i += 2) {
        const uint8_t lo4 = step > 0.0f ? E2M1Encode(cn::Div(w[i], step)) : 0;
        const uint8_t hi4 = step > 0.0f ? E2M1Encode(cn::Div(w[i + 1], step)) : 0;
        packed[(b * kNvfp4Block + i) / 2] = static_cast<uint8_t>(lo4 | (hi4 << 4));
      }
    }
  });
}

}  // namespace m3::kernels::cpu
