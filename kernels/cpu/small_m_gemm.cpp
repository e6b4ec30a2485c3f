// SmallMGemmKMajor: the columns are cut into tiles as wide as the ISA's register tile (64
// floats on AVX-512, 16 on AVX2, 16 in the portable loops) and, within each column tile, the
// rows into tiles of at most 6 (balanced, so 8 rows run as 4 + 4 rather than 6 + 2). A column
// tile's weight panel (k x 64 floats) is read from memory by the first row tile and from cache
// by the others. Each register tile is a function template instance, so its accumulators stay
// in registers; the instances of one ISA sit in a table indexed by (rows, vectors).
#include "kernels/cpu/small_m_gemm.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <utility>

#include "kernels/cpu/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define M3_HAVE_X86_TILES 1
#endif

namespace m3::kernels::cpu {
namespace {

constexpr int kMaxRowTile = 6;

using TileFn = void (*)(const float* x, int64_t ldx, int64_t k, const float* w, int64_t ldw,
                        int64_t cols, float* y, int64_t ldy);

// Portable: the inner loop over the tile's columns is what the compiler vectorizes.
template <int MR>
void TilePortable(const float* x, int64_t ldx, int64_t k, const float* w, int64_t ldw, int64_t cols,
                  float* y, int64_t ldy) {
  constexpr int kCols = 16;
  float acc[MR][kCols] = {};
  for (int64_t t = 0; t < k; ++t) {
    const float* wk = w + t * ldw;
    for (int i = 0; i < MR; ++i) {
      const float a = x[i * ldx + t];
      for (int64_t j = 0; j < cols; ++j) acc[i][j] += a * wk[j];
    }
  }
  for (int i = 0; i < MR; ++i) std::copy_n(acc[i], cols, y + i * ldy);
}

#ifdef M3_HAVE_X86_TILES

// How far ahead (in k steps) the weight rows are prefetched: the k-major rows are ldw floats
// apart, a stride the hardware prefetchers follow late at the start of each panel.
constexpr int64_t kPrefetchAhead = 8;

template <int MR, int NV>
__attribute__((target("avx512f"))) void TileAvx512(const float* x, int64_t ldx, int64_t k,
                                                   const float* w, int64_t ldw, int64_t cols,
                                                   float* y, int64_t ldy) {
  __m512 acc[MR][NV];
  __mmask16 mask[NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) {
    const int64_t left = cols - 16 * j;
    mask[j] = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t t = 0; t < k; ++t) {
    const float* wk = w + t * ldw;
    if (t + kPrefetchAhead < k) {
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(wk + kPrefetchAhead * ldw + 16 * j),
                     _MM_HINT_T0);
    }
    __m512 b[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) b[j] = _mm512_maskz_loadu_ps(mask[j], wk + 16 * j);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(x[i * ldx + t]);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_fmadd_ps(a, b[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) _mm512_mask_storeu_ps(y + i * ldy + 16 * j, mask[j], acc[i][j]);
}

// AVX2 has no cheap masked loads (vmaskmovps is slow on several cores), so full tiles load
// plainly and only the last, partial column tile takes the masked variant.
template <int MR, int NV, bool kMasked>
__attribute__((target("avx2,fma"))) void TileAvx2(const float* x, int64_t ldx, int64_t k,
                                                  const float* w, int64_t ldw, int64_t cols,
                                                  float* y, int64_t ldy) {
  __m256 acc[MR][NV];
  __m256i mask[NV];
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j)
    mask[j] = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols - 8 * j)), lane);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t t = 0; t < k; ++t) {
    const float* wk = w + t * ldw;
    if (t + kPrefetchAhead < k)
      _mm_prefetch(reinterpret_cast<const char*>(wk + kPrefetchAhead * ldw), _MM_HINT_T0);
    __m256 b[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j)
      b[j] = kMasked ? _mm256_maskload_ps(wk + 8 * j, mask[j]) : _mm256_loadu_ps(wk + 8 * j);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(x + i * ldx + t);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(a, b[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      if (kMasked)
        _mm256_maskstore_ps(y + i * ldy + 8 * j, mask[j], acc[i][j]);
      else
        _mm256_storeu_ps(y + i * ldy + 8 * j, acc[i][j]);
    }
}

template <size_t... I>
constexpr std::array<TileFn, sizeof...(I)> Avx512Tiles(std::index_sequence<I...>) {
  return {&TileAvx512<static_cast<int>(I / 4) + 1, static_cast<int>(I % 4) + 1>...};
}
template <bool kMasked, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> Avx2Tiles(std::index_sequence<I...>) {
  return {&TileAvx2<static_cast<int>(I / 2) + 1, static_cast<int>(I % 2) + 1, kMasked>...};
}

// Indexed [(rows - 1) * vectors_max + vectors - 1].
constexpr auto kAvx512 = Avx512Tiles(std::make_index_sequence<kMaxRowTile * 4>());
constexpr auto kAvx2Full = Avx2Tiles<false>(std::make_index_sequence<kMaxRowTile * 2>());
constexpr auto kAvx2Masked = Avx2Tiles<true>(std::make_index_sequence<kMaxRowTile * 2>());

#endif  // M3_HAVE_X86_TILES

template <size_t... I>
constexpr std::array<TileFn, sizeof...(I)> PortableTiles(std::index_sequence<I...>) {
  return {&TilePortable<static_cast<int>(I) + 1>...};
}
constexpr auto kPortable = PortableTiles(std::make_index_sequence<kMaxRowTile>());

}  // namespace

bool SmallMKernelsEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("M3_CPU_SMALL_M");
    return !(v && std::string(v) == "0");
  }();
  return enabled;
}

GemmIsa BestGemmIsa() {
  static const GemmIsa best = CpuHasAvx512f()   ? GemmIsa::kAvx512
                              : CpuHasAvx2Fma() ? GemmIsa::kAvx2
                                                : GemmIsa::kPortable;
  return best;
}

const char* GemmIsaName(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAvx512:
      return "avx512";
    case GemmIsa::kAvx2:
      return "avx2";
    case GemmIsa::kPortable:
      break;
  }
  return "portable";
}

bool CpuSupports(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAvx512:
      return CpuHasAvx512f();
    case GemmIsa::kAvx2:
      return CpuHasAvx2Fma();
    case GemmIsa::kPortable:
      break;
  }
  return true;
}

void SmallMGemmKMajor(const float* x, int64_t m, int64_t ldx, int64_t k, const float* wt,
                      int64_t ldw, int64_t n, float* y, int64_t ldy, GemmIsa isa) {
  if (m <= 0 || n <= 0) return;
#ifndef M3_HAVE_X86_TILES
  isa = GemmIsa::kPortable;
#endif
  const int64_t row_tiles = (m + kMaxRowTile - 1) / kMaxRowTile;
  const int64_t tile_rows = (m + row_tiles - 1) / row_tiles;
  const int64_t vec = isa == GemmIsa::kAvx2 ? 8 : 16;
  const int64_t max_vecs = isa == GemmIsa::kAvx512 ? 4 : isa == GemmIsa::kAvx2 ? 2 : 1;
  const int64_t tile_cols = vec * max_vecs;
  for (int64_t c0 = 0; c0 < n; c0 += tile_cols) {
    const int64_t cols = std::min(tile_cols, n - c0);
    [[maybe_unused]] const int64_t vecs = (cols + vec - 1) / vec;
    for (int64_t r0 = 0; r0 < m; r0 += tile_rows) {
      const int64_t rows = std::min(tile_rows, m - r0);
      TileFn fn = kPortable[rows - 1];
#ifdef M3_HAVE_X86_TILES
      if (isa == GemmIsa::kAvx512) {
        fn = kAvx512[(rows - 1) * 4 + vecs - 1];
      } else if (isa == GemmIsa::kAvx2) {
        fn = (cols == vecs * vec ? kAvx2Full : kAvx2Masked)[(rows - 1) * 2 + vecs - 1];
      }
#endif
      fn(x + r0 * ldx, ldx, k, wt + c0, ldw, cols, y + r0 * ldy + c0, ldy);
    }
  }
}

}  // namespace m3::kernels::cpu
