// Antialiased bicubic uint8 resampling (see bicubic_resampler.h for the semantics). The AVX2
// kernels compute exactly the scalar integer arithmetic, only several samples at a time.
#include "gateway/media/bicubic_resampler.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gateway/media/cpu_features.h"
#include "shared/error.h"

namespace m3::media {
namespace {

// Keys cubic convolution with a = -0.5 (PIL's and PyTorch's antialiased bicubic filter).
double CubicFilter(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

BicubicResampler::Axis BuildAxis(int64_t in_size, int64_t out_size) {
  BicubicResampler::Axis axis;
  axis.in_size = in_size;
  axis.out_size = out_size;
  if (in_size == out_size) return axis;
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;  // interp_size 4, halved, widened
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  const int max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  std::vector<double> real(static_cast<size_t>(out_size) * max_taps, 0.0);
  axis.start.resize(out_size);
  axis.count.resize(out_size);
  double wt_max = 0.0;
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    // Truncating casts, as in the reference.
    const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    int64_t xsize = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size) - xmin;
    xsize = std::clamp<int64_t>(xsize, 0, max_taps);
    double* w = real.data() + i * max_taps;
    double total = 0.0;
    for (int64_t j = 0; j < xsize; ++j) {
      w[j] = CubicFilter((static_cast<double>(j + xmin) - center + 0.5) * invscale);
      total += w[j];
    }
    if (total != 0.0) {
      for (int64_t j = 0; j < xsize; ++j) {
        w[j] /= total;
        wt_max = std::max(wt_max, w[j]);
      }
    }
    axis.start[i] = static_cast<int32_t>(xmin);
    axis.count[i] = static_cast<int32_t>(xsize);
  }
  int precision = 0;
  for (precision = 0; precision < 22; ++precision) {
    const int next = static_cast<int>(0.5 + wt_max * (1 << (precision + 1)));
    if (next >= (1 << 15)) break;
  }
  axis.precision = precision;
  axis.taps = (max_taps + 3) / 4 * 4;
  axis.weights.assign(static_cast<size_t>(out_size) * axis.taps, 0);
  for (int64_t i = 0; i < out_size; ++i) {
    for (int j = 0; j < axis.count[i]; ++j) {
      const double v = real[i * max_taps + j] * (1 << precision);
      axis.weights[i * axis.taps + j] =
          static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
    }
  }
  return axis;
}

inline uint8_t Clamp8(int32_t v) {
  return static_cast<uint8_t>(std::clamp(v, 0, 255));
}

// Rows [y0, y1) of `in` resampled horizontally into rows out_y0.. of `out`.
void HorizontalScalar(const BicubicResampler::Axis& ax, const ImageBuffer& in, int64_t y0,
                      int64_t y1, ImageBuffer& out, int64_t out_y0) {
  const int32_t half = 1 << (ax.precision - 1);
  for (int64_t y = y0; y < y1; ++y) {
    const uint8_t* src = in.row(y);
    uint8_t* dst = out.row(out_y0 + y - y0);
    for (int64_t x = 0; x < ax.out_size; ++x) {
      const int16_t* w = ax.weights.data() + x * ax.taps;
      const uint8_t* p = src + static_cast<int64_t>(ax.start[x]) * 3;
      int32_t s0 = half, s1 = half, s2 = half;
      for (int k = 0; k < ax.count[x]; ++k) {
        s0 += p[3 * k] * w[k];
        s1 += p[3 * k + 1] * w[k];
        s2 += p[3 * k + 2] * w[k];
      }
      dst[3 * x] = Clamp8(s0 >> ax.precision);
      dst[3 * x + 1] = Clamp8(s1 >> ax.precision);
      dst[3 * x + 2] = Clamp8(s2 >> ax.precision);
    }
  }
}

// Vertical pass for output rows [oy0, oy1); `in` row r holds source row y_offset + r.
void VerticalScalar(const BicubicResampler::Axis& ax, const ImageBuffer& in, int64_t y_offset,
                    ImageBuffer& out, int64_t oy0, int64_t oy1) {
  const int32_t half = 1 << (ax.precision - 1);
  const int64_t n = out.row_bytes();
  std::vector<int32_t> acc(n);
  for (int64_t y = oy0; y < oy1; ++y) {
    std::fill(acc.begin(), acc.end(), half);
    const int16_t* w = ax.weights.data() + y * ax.taps;
    for (int k = 0; k < ax.count[y]; ++k) {
      const uint8_t* src = in.row(ax.start[y] + k - y_offset);
      const int32_t wk = w[k];
      for (int64_t i = 0; i < n; ++i) acc[i] += src[i] * wk;
    }
    uint8_t* dst = out.row(y);
    for (int64_t i = 0; i < n; ++i) dst[i] = Clamp8(acc[i] >> ax.precision);
  }
}

__attribute__((target("avx2"))) void HorizontalAvx2(const BicubicResampler::Axis& ax,
                                                    const int16_t* simd_weights,
                                                    const ImageBuffer& in, int64_t y0, int64_t y1,
                                                    ImageBuffer& out, int64_t out_y0) {
  // Four source pixels (12 bytes) -> two pairs of taps, each pair as (c0 c0' c1 c1' c2 c2' 0 0).
  const __m128i shuffle = _mm_setr_epi8(0, 3, 1, 4, 2, 5, -1, -1, 6, 9, 7, 10, 8, 11, -1, -1);
  const __m128i half = _mm_set1_epi32(1 << (ax.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(ax.precision);
  const int groups_stride = ax.taps / 4;
  for (int64_t y = y0; y < y1; ++y) {
    const uint8_t* src = in.row(y);
    uint8_t* dst = out.row(out_y0 + y - y0);
    for (int64_t x = 0; x < ax.out_size; ++x) {
      const uint8_t* p = src + static_cast<int64_t>(ax.start[x]) * 3;
      const __m256i* w = reinterpret_cast<const __m256i*>(simd_weights) + x * groups_stride;
      const int groups = (ax.count[x] + 3) / 4;
      __m256i acc = _mm256_setzero_si256();
      for (int g = 0; g < groups; ++g) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 12 * g));
        const __m256i v = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(raw, shuffle));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(v, _mm256_loadu_si256(w + g)));
      }
      __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
      sum = _mm_sra_epi32(_mm_add_epi32(sum, half), shift);
      sum = _mm_packus_epi16(_mm_packs_epi32(sum, sum), sum);
      const int32_t px = _mm_cvtsi128_si32(sum);
      std::memcpy(dst + 3 * x, &px, 4);  // the 4th byte is overwritten by the next pixel
    }
  }
}

__attribute__((target("avx2"))) void VerticalAvx2(const BicubicResampler::Axis& ax,
                                                  const ImageBuffer& in, int64_t y_offset,
                                                  ImageBuffer& out, int64_t oy0, int64_t oy1) {
  const __m256i half = _mm256_set1_epi32(1 << (ax.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(ax.precision);
  const int64_t n = out.row_bytes();
  for (int64_t y = oy0; y < oy1; ++y) {
    const int16_t* w = ax.weights.data() + y * ax.taps;
    const int count = ax.count[y];
    const uint8_t* base = in.row(ax.start[y] - y_offset);
    const int64_t stride = in.row_bytes();
    uint8_t* dst = out.row(y);
    // 16 bytes per step; the last step may run into the padding of both buffers.
    for (int64_t i = 0; i < n; i += 16) {
      __m256i lo = half, hi = half;
      int k = 0;
      for (; k + 1 < count; k += 2) {
        const __m256i a = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + k * stride + i)));
        const __m256i b = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + (k + 1) * stride + i)));
        const __m256i wk = _mm256_set1_epi32(
            static_cast<int32_t>(static_cast<uint16_t>(w[k]) |
                                 (static_cast<uint32_t>(static_cast<uint16_t>(w[k + 1])) << 16)));
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), wk));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), wk));
      }
      if (k < count) {
        const __m256i a = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + k * stride + i)));
        const __m256i wk = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint16_t>(w[k])));
        const __m256i z = _mm256_setzero_si256();
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, z), wk));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, z), wk));
      }
      lo = _mm256_sra_epi32(lo, shift);
      hi = _mm256_sra_epi32(hi, shift);
      const __m256i s16 = _mm256_packs_epi32(lo, hi);  // in order within each 128-bit lane
      const __m256i s8 = _mm256_permute4x64_epi64(_mm256_packus_epi16(s16, s16), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(s8));
    }
  }
}

// Four output pixels per step (AVX-512 VBMI): their source spans fit one 64-byte load (two for
// wider filters), from which vpermb builds, per pair of taps, each pixel's (c0 c0' c1 c1' c2 c2' x
// x) words in its own 128-bit lane; the weights of the x words are zero. Same integer sums as the
// scalar path. GCC 12's AVX-512 headers use _mm512_undefined_* internally, which trips
// -Wmaybe-uninitialized (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Rows go through in pairs: each table load (byte-permute indices, weights) serves two rows.
// Four groups (16 pixels) are packed and stored together: two saturating packs and one vpermb
// turn their sums into 48 bytes in pixel order (the packs' saturation is the clamp to 0..255).
template <int kRows>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) inline void HorizontalRowsAvx512(
    const BicubicResampler::Axis& ax, const BicubicResampler::Vbmi& k, const __m512i& compact,
    const uint8_t* const* src, uint8_t* const* dst) {
  const __m512i half = _mm512_set1_epi32(1 << (ax.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(ax.precision);
  const __m512i step = _mm512_set1_epi8(6);
  const int64_t groups = (ax.out_size + 3) / 4;
  const __m512i* w = reinterpret_cast<const __m512i*>(k.weights.data());
  const __m512i* offs = reinterpret_cast<const __m512i*>(k.offsets.data());
  for (int64_t g4 = 0; g4 < groups; g4 += 4) {
    __m512i sums[kRows][4];
    for (int q = 0; q < 4; ++q) {
      const int64_t g = g4 + q;
      if (g >= groups) {
        for (int r = 0; r < kRows; ++r) sums[r][q] = _mm512_setzero_si512();
        continue;
      }
      const int64_t at = static_cast<int64_t>(ax.start[4 * g]) * 3;
      __m512i raw[kRows], raw_hi[kRows], acc[kRows];
      for (int r = 0; r < kRows; ++r) {
        raw[r] = _mm512_loadu_si512(src[r] + at);
        // Two windows for wide filters: index bit 6 picks the second 64 bytes.
        raw_hi[r] = k.wide ? _mm512_loadu_si512(src[r] + at + 64) : raw[r];
        acc[r] = half;
      }
      __m512i idx = _mm512_loadu_si512(offs + g);
      for (int j = 0; j < k.pairs; ++j) {
        const __m512i wj = _mm512_loadu_si512(w++);
        for (int r = 0; r < kRows; ++r) {
          const __m512i v =
              _mm512_maskz_permutex2var_epi8(0x5555555555555555ULL, raw[r], idx, raw_hi[r]);
          acc[r] = _mm512_add_epi32(acc[r], _mm512_madd_epi16(v, wj));
        }
        idx = _mm512_add_epi8(idx, step);
      }
      for (int r = 0; r < kRows; ++r) sums[r][q] = _mm512_sra_epi32(acc[r], shift);
    }
    // Exactly these pixels' bytes: the rows are written together, so a store running past a
    // row's end would land on the next row's first pixels, already written.
    const int64_t pixels = std::min<int64_t>(16, ax.out_size - 4 * g4);
    const __mmask64 bytes = (uint64_t{1} << (3 * pixels)) - 1;
    for (int r = 0; r < kRows; ++r) {
      const __m512i b = _mm512_packus_epi16(_mm512_packs_epi32(sums[r][0], sums[r][1]),
                                            _mm512_packs_epi32(sums[r][2], sums[r][3]));
      _mm512_mask_storeu_epi8(dst[r] + 12 * g4, bytes, _mm512_permutexvar_epi8(compact, b));
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) void HorizontalAvx512(
    const BicubicResampler::Axis& ax, const BicubicResampler::Vbmi& k, const ImageBuffer& in,
    int64_t y0, int64_t y1, ImageBuffer& out, int64_t out_y0) {
  // After the packs, lane L holds groups q = 0..3's pixel L as 4 bytes (c0 c1 c2 0) at 16L + 4q:
  // pixel 4q + L of the 16, whose channel c goes to byte 3 (4q + L) + c.
  alignas(64) uint8_t order[64] = {};
  for (int q = 0; q < 4; ++q) {
    for (int lane = 0; lane < 4; ++lane) {
      for (int c = 0; c < 3; ++c) order[3 * (4 * q + lane) + c] = 16 * lane + 4 * q + c;
    }
  }
  const __m512i compact = _mm512_load_si512(order);
  int64_t y = y0;
  for (; y + 1 < y1; y += 2) {
    const uint8_t* src[2] = {in.row(y), in.row(y + 1)};
    uint8_t* dst[2] = {out.row(out_y0 + y - y0), out.row(out_y0 + y + 1 - y0)};
    HorizontalRowsAvx512<2>(ax, k, compact, src, dst);
  }
  if (y < y1) {
    const uint8_t* src[1] = {in.row(y)};
    uint8_t* dst[1] = {out.row(out_y0 + y - y0)};
    HorizontalRowsAvx512<1>(ax, k, compact, src, dst);
  }
}

// The AVX2 vertical kernel at twice the width: 32 bytes of a row per step.
__attribute__((target("avx512f,avx512bw"))) void VerticalAvx512(const BicubicResampler::Axis& ax,
                                                                const ImageBuffer& in,
                                                                int64_t y_offset, ImageBuffer& out,
                                                                int64_t oy0, int64_t oy1) {
  const __m512i half = _mm512_set1_epi32(1 << (ax.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(ax.precision);
  const int64_t n = out.row_bytes();
  const int64_t stride = in.row_bytes();
  for (int64_t y = oy0; y < oy1; ++y) {
    const int16_t* w = ax.weights.data() + y * ax.taps;
    const int count = ax.count[y];
    const uint8_t* base = in.row(ax.start[y] - y_offset);
    uint8_t* dst = out.row(y);
    // The last step may run into the next row or the padding of both buffers.
    for (int64_t i = 0; i < n; i += 32) {
      __m512i lo = half, hi = half;
      for (int k = 0; k < count; k += 2) {
        const __m512i a = _mm512_cvtepu8_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + k * stride + i)));
        const bool pair = k + 1 < count;
        const __m512i b = pair ? _mm512_cvtepu8_epi16(_mm256_loadu_si256(
                                     reinterpret_cast<const __m256i*>(base + (k + 1) * stride + i)))
                               : _mm512_setzero_si512();
        const int16_t w1 = pair ? w[k + 1] : 0;
        const __m512i wk = _mm512_set1_epi32(
            static_cast<int32_t>(static_cast<uint16_t>(w[k]) |
                                 (static_cast<uint32_t>(static_cast<uint16_t>(w1)) << 16)));
        lo = _mm512_add_epi32(lo, _mm512_madd_epi16(_mm512_unpacklo_epi16(a, b), wk));
        hi = _mm512_add_epi32(hi, _mm512_madd_epi16(_mm512_unpackhi_epi16(a, b), wk));
      }
      // packs keeps byte order within each 128-bit lane: words come out in row order.
      const __m512i s16 = _mm512_max_epi16(
          _mm512_packs_epi32(_mm512_sra_epi32(lo, shift), _mm512_sra_epi32(hi, shift)),
          _mm512_setzero_si512());
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtusepi16_epi8(s16));
    }
  }
}
#pragma GCC diagnostic pop

// The AVX-512 horizontal tables, or none when a group of four outputs reads beyond one
// 128-byte window (downscales beyond about 5x) and the AVX2 kernel must serve.
BicubicResampler::Vbmi BuildVbmi(const BicubicResampler::Axis& ax) {
  BicubicResampler::Vbmi k;
  const int64_t groups = (ax.out_size + 3) / 4;
  int max_count = 1;
  for (int64_t x = 0; x < ax.out_size; ++x) max_count = std::max(max_count, ax.count[x]);
  k.pairs = (max_count + 1) / 2;
  int64_t highest = 0;
  for (int64_t x = 0; x < ax.out_size; ++x) {
    const int64_t rel = ax.start[x] - ax.start[x / 4 * 4];
    // Highest byte read: the last tap pair's c2 (the pair's second tap may lie past count).
    highest = std::max<int64_t>(highest, 3 * (rel + 2 * k.pairs - 1) + 2);
  }
  if (highest > 127) return {};
  k.wide = highest > 63;
  static constexpr int kPattern[8] = {0, 3, 1, 4, 2, 5, 0, 0};
  k.offsets.assign(static_cast<size_t>(groups) * 64, 0);
  k.weights.assign(static_cast<size_t>(groups) * k.pairs * 32, 0);
  for (int64_t x = 0; x < ax.out_size; ++x) {
    const int64_t g = x / 4, lane = x % 4;
    const int64_t rel = ax.start[x] - ax.start[g * 4];
    for (int word = 0; word < 8; ++word) {
      k.offsets[g * 64 + lane * 16 + 2 * word] = static_cast<uint8_t>(3 * rel + kPattern[word]);
    }
    for (int j = 0; j < k.pairs; ++j) {
      int16_t* w = k.weights.data() + (g * k.pairs + j) * 32 + lane * 8;
      for (int t = 0; t < 2; ++t) {
        const int tap = 2 * j + t;
        const int16_t v = tap < ax.count[x] ? ax.weights[x * ax.taps + tap] : 0;
        w[t] = w[2 + t] = w[4 + t] = v;
      }
    }
  }
  k.ok = true;
  return k;
}

}  // namespace

BicubicResampler::BicubicResampler(int64_t in_width, int64_t in_height, int64_t out_width,
                                   int64_t out_height) {
  Require(in_width > 0 && in_height > 0 && out_width > 0 && out_height > 0,
          ErrorCode::kInvalidArgument, "resize: sizes must be positive");
  h_ = BuildAxis(in_width, out_width);
  v_ = BuildAxis(in_height, out_height);
  simd_ok_ = CpuHasAvx2();
  if (!h_.identity() && CpuHasVbmi()) vbmi_ = BuildVbmi(h_);
  // The AVX-512 kernel set: VBMI horizontal when its tables fit (else AVX2), BW vertical.
  avx512_ok_ = simd_ok_ && CpuHasAvx512bw();
  if (!h_.identity()) {
    // Each 4-tap group as 16 int16: (w0 w1) x3, 0 0, (w2 w3) x3, 0 0, matching the shuffle.
    const int groups = h_.taps / 4;
    h_simd_weights_.assign(static_cast<size_t>(h_.out_size) * groups * 16, 0);
    for (int64_t x = 0; x < h_.out_size; ++x) {
      for (int g = 0; g < groups; ++g) {
        const int16_t* w = h_.weights.data() + x * h_.taps + 4 * g;
        int16_t* d = h_simd_weights_.data() + (x * groups + g) * 16;
        for (int c = 0; c < 3; ++c) {
          d[2 * c] = w[0];
          d[2 * c + 1] = w[1];
          d[8 + 2 * c] = w[2];
          d[8 + 2 * c + 1] = w[3];
        }
      }
    }
  }
}

void BicubicResampler::Resize(const ImageBuffer& in, ImageBuffer& out) const {
  Run(in, out, Preferred());
}

void BicubicResampler::ResizeScalar(const ImageBuffer& in, ImageBuffer& out) const {
  Run(in, out, Kernel::kScalar);
}

void BicubicResampler::ResizeWith(Kernel kernel, const ImageBuffer& in, ImageBuffer& out) const {
  Require(Has(kernel), ErrorCode::kUnsupported, "resize: that kernel is not available here");
  Run(in, out, kernel);
}

bool BicubicResampler::Has(Kernel kernel) const {
  return kernel == Kernel::kScalar || (kernel == Kernel::kAvx2 && simd_ok_) ||
         (kernel == Kernel::kAvx512 && avx512_ok_);
}

BicubicResampler::Kernel BicubicResampler::Preferred() const {
  return avx512_ok_ ? Kernel::kAvx512 : simd_ok_ ? Kernel::kAvx2 : Kernel::kScalar;
}

void BicubicResampler::Horizontal(Kernel kernel, const ImageBuffer& in, int64_t y0, int64_t y1,
                                  ImageBuffer& out, int64_t out_y0) const {
  switch (kernel) {
    case Kernel::kAvx512:
      if (vbmi_.ok) {
        HorizontalAvx512(h_, vbmi_, in, y0, y1, out, out_y0);
        break;
      }
      [[fallthrough]];
    case Kernel::kAvx2:
      HorizontalAvx2(h_, h_simd_weights_.data(), in, y0, y1, out, out_y0);
      break;
    case Kernel::kScalar:
      HorizontalScalar(h_, in, y0, y1, out, out_y0);
      break;
  }
}

void BicubicResampler::Vertical(Kernel kernel, const ImageBuffer& in, int64_t y_offset,
                                ImageBuffer& out, int64_t oy0, int64_t oy1) const {
  switch (kernel) {
    case Kernel::kAvx512:
      VerticalAvx512(v_, in, y_offset, out, oy0, oy1);
      break;
    case Kernel::kAvx2:
      VerticalAvx2(v_, in, y_offset, out, oy0, oy1);
      break;
    case Kernel::kScalar:
      VerticalScalar(v_, in, y_offset, out, oy0, oy1);
      break;
  }
}

void BicubicResampler::Run(const ImageBuffer& in, ImageBuffer& out, Kernel kernel) const {
  Require(in.width == h_.in_size && in.height == v_.in_size, ErrorCode::kInternal,
          "resize: input size does not match the resampler");
  Require(
      static_cast<int64_t>(in.pixels.size()) >= in.width * in.height * 3 + ImageBuffer::kPadding,
      ErrorCode::kInternal, "resize: input buffer lacks padding");
  if (h_.identity() && v_.identity()) {
    out = in;
    return;
  }
  Stream stream(*this, in.order, out, kernel);
  stream.Push(in, in.height);
}

// Window rows beyond the widest vertical filter: each slide moves at most that filter's rows
// and frees at least this many.
constexpr int64_t kWindowSlack = 32;

BicubicResampler::Stream::Stream(const BicubicResampler& resampler, ChannelOrder order,
                                 ImageBuffer& out)
    : Stream(resampler, order, out, resampler.Preferred()) {}

BicubicResampler::Stream::Stream(const BicubicResampler& resampler, ChannelOrder order,
                                 ImageBuffer& out, Kernel kernel)
    : r_(resampler), out_(out), kernel_(kernel) {
  Require(r_.Has(kernel), ErrorCode::kUnsupported, "resize: that kernel is not available here");
  const Axis& v = r_.v_;
  out_.Allocate(r_.h_.out_size, v.out_size, order);
  if (v.identity()) {
    need_end_ = v.in_size;
  } else {
    // Both filter edges only move down the image, so the last output row reads the furthest.
    need_end_ = v.start.back() + v.count.back();
    window_.Allocate(r_.h_.out_size, v.taps + kWindowSlack, order);
  }
}

void BicubicResampler::Stream::Push(const ImageBuffer& strip, int64_t rows) {
  const Axis &h = r_.h_, &v = r_.v_;
  Require(strip.width == h.in_size && rows >= 0 && rows <= strip.height &&
              next_ + rows <= v.in_size &&
              strip.pixels.size() >=
                  static_cast<size_t>(strip.row_bytes() * strip.height + ImageBuffer::kPadding),
          ErrorCode::kInternal, "resize: strip does not fit the stream");
  const int64_t first = next_;
  next_ += rows;
  // Only the source rows some output row reads: [v.start.front(), need_end_).
  const int64_t skip_to = v.identity() ? 0 : v.start.front();
  int64_t i = std::clamp<int64_t>(skip_to - first, 0, rows);
  const int64_t end = std::clamp<int64_t>(need_end_ - first, 0, rows);
  while (i < end) {
    if (v.identity()) {  // rows go straight to the output
      if (h.identity()) {
        std::memcpy(out_.row(first + i), strip.row(i), (end - i) * strip.row_bytes());
      } else {
        r_.Horizontal(kernel_, strip, i, end, out_, first + i);
      }
      next_out_ = first + end;
      return;
    }
    if (window_rows_ == window_.height) Slide();
    if (window_rows_ == 0) window_first_ = first + i;
    const int64_t n = std::min(end - i, window_.height - window_rows_);
    if (h.identity()) {
      std::memcpy(window_.row(window_rows_), strip.row(i), n * strip.row_bytes());
    } else {
      r_.Horizontal(kernel_, strip, i, i + n, window_, window_rows_);
    }
    window_rows_ += n;
    i += n;
    Emit();
  }
}

// Writes every output row whose source rows are all in the window.
void BicubicResampler::Stream::Emit() {
  const Axis& v = r_.v_;
  const int64_t have = window_first_ + window_rows_;
  int64_t oy1 = next_out_;
  while (oy1 < v.out_size && v.start[oy1] + v.count[oy1] <= have) ++oy1;
  if (oy1 == next_out_) return;
  r_.Vertical(kernel_, window_, window_first_, out_, next_out_, oy1);
  next_out_ = oy1;
}

// Drops the window rows no remaining output row reads, making room at the end.
void BicubicResampler::Stream::Slide() {
  const Axis& v = r_.v_;
  const int64_t keep_from =
      next_out_ < v.out_size ? v.start[next_out_] : window_first_ + window_rows_;
  const int64_t drop = std::clamp<int64_t>(keep_from - window_first_, 0, window_rows_);
  std::memmove(window_.row(0), window_.row(drop), (window_rows_ - drop) * window_.row_bytes());
  window_first_ += drop;
  window_rows_ -= drop;
}

}  // namespace m3::media
