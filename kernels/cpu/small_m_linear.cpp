// SmallMLinear: column blocks of 64 outputs are the parallel tasks; within a block, tiles of 4
// columns x up to 6 rows (balanced row tiles). Tiles are function template instances so the
// accumulators stay in registers.
#include "kernels/cpu/small_m_linear.h"

#include <algorithm>
#include <array>
#include <utility>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/parallel_for.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define M3_HAVE_X86_TILES 1
#endif

namespace m3::kernels::cpu {
namespace {

#ifdef M3_HAVE_X86_TILES

constexpr int kMaxRows = 6;
constexpr int kMaxCols = 4;

using TileFn = void (*)(const float* x, int64_t k, const float* w, const float* bias, float* y,
                        int64_t ldy);

// A fixed tree: halves, quarters, pairs, neighbours. The masked forms with an explicit source:
// GCC 12's unmasked shuffles (and _mm512_reduce_add_ps) trip -Werror=uninitialized in its own
// header.
__attribute__((target("avx512f"))) inline float ReduceAdd(__m512 v) {
  constexpr __mmask16 kAll = 0xFFFF;
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, kAll, v, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, kAll, v, v, 0xB1));
  v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, kAll, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, kAll, v, 0xB1));
  return _mm512_cvtss_f32(v);
}

template <int MR, int NC>
__attribute__((target("avx512f"))) void Tile(const float* x, int64_t k, const float* w,
                                             const float* bias, float* y, int64_t ldy) {
  __m512 acc[MR][NC];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t t = 0; t < k; t += 16) {
    const __mmask16 mask = k - t >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (k - t)) - 1);
    __m512 b[NC];
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) b[j] = _mm512_maskz_loadu_ps(mask, w + j * k + t);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_maskz_loadu_ps(mask, x + i * k + t);
#pragma GCC unroll 8
      for (int j = 0; j < NC; ++j) acc[i][j] = _mm512_fmadd_ps(a, b[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) {
      const float s = ReduceAdd(acc[i][j]);
      y[i * ldy + j] = bias ? s + bias[j] : s;
    }
}

template <size_t... I>
constexpr std::array<TileFn, sizeof...(I)> Tiles(std::index_sequence<I...>) {
  return {&Tile<static_cast<int>(I / kMaxCols) + 1, static_cast<int>(I % kMaxCols) + 1>...};
}
constexpr auto kTiles = Tiles(std::make_index_sequence<kMaxRows * kMaxCols>());

#endif  // M3_HAVE_X86_TILES

}  // namespace

bool SmallMLinear(const float* x, int64_t m, int64_t k, const float* w, int64_t n,
                  const float* bias, float* y) {
#ifdef M3_HAVE_X86_TILES
  if (!CpuHasAvx512f()) return false;
  if (m <= 0 || n <= 0) return true;
  const int64_t row_tiles = (m + kMaxRows - 1) / kMaxRows;
  const int64_t tile_rows = (m + row_tiles - 1) / row_tiles;
  constexpr int64_t kBlock = 64;
  ParallelFor((n + kBlock - 1) / kBlock, 1, [&](int64_t b, int64_t e) {
    for (int64_t c0 = b * kBlock; c0 < std::min(n, e * kBlock); c0 += kMaxCols) {
      const int64_t cols = std::min<int64_t>(kMaxCols, n - c0);
      for (int64_t r0 = 0; r0 < m; r0 += tile_rows) {
        const int64_t rows = std::min(tile_rows, m - r0);
        kTiles[(rows - 1) * kMaxCols + cols - 1](x + r0 * k, k, w + c0 * k,
                                                 bias ? bias + c0 : nullptr, y + r0 * n + c0, n);
      }
    }
  });
  return true;
#else
  (void)x, (void)m, (void)k, (void)w, (void)n, (void)bias, (void)y;
  return false;
#endif
}

}  // namespace m3::kernels::cpu
