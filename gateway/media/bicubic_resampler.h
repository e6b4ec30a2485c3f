// BicubicResampler: antialiased bicubic resize of 8-bit images that reproduces torchvision's
// resize(..., BICUBIC, antialias=True) on uint8 tensors (PyTorch's CPU uint8 path, which
// follows PIL's ImagingResample): Keys cubic a = -0.5 with its support widened by the
// downscale factor, weights normalized per output sample then quantized to int16 at the
// largest precision that fits the axis's largest weight; the horizontal pass runs first and
// its output is rounded and clamped to uint8 before the vertical pass. An axis whose size
// does not change is skipped, as PyTorch does.
//
// The weight tables are built once per (input size, output size) pair, so one resampler
// serves every frame of a video. Resize() is const and thread-safe.
//
// Stream resamples while the source arrives top to bottom (a decoder's strips of rows): each
// source row is filtered horizontally into a small window as it comes, and each output row is
// written as soon as the window holds the rows it reads, so the full-size source never has to
// exist and the rows in flight stay in cache. Resize() is a Stream fed the whole image.
#pragma once

#include <cstdint>
#include <vector>

#include "gateway/media/image_buffer.h"

namespace m3::media {

class BicubicResampler {
 public:
  BicubicResampler(int64_t in_width, int64_t in_height, int64_t out_width, int64_t out_height);

  // `in` must be in_width x in_height; `out` is (re)allocated to the output size and keeps
  // the input's channel order.
  void Resize(const ImageBuffer& in, ImageBuffer& out) const;
  // Same, without SIMD: the arithmetic every path must reproduce bit for bit (tests).
  void ResizeScalar(const ImageBuffer& in, ImageBuffer& out) const;

  // The kernels Resize() picks from at run time (CPU features); tests run each. kAvx512: the
  // VBMI horizontal kernel where its 128-byte window holds four outputs' taps (else AVX2's),
  // and the AVX-512BW vertical kernel.
  enum class Kernel { kScalar, kAvx2, kAvx512 };
  bool Has(Kernel kernel) const;
  Kernel Preferred() const;
  void ResizeWith(Kernel kernel, const ImageBuffer& in, ImageBuffer& out) const;

  // One axis's filter: output sample i reads count[i] inputs from start[i] with weights
  // weights[i * taps ...] (zero beyond count[i]) in fixed point with `precision` bits.
  struct Axis {
    int64_t in_size = 0;
    int64_t out_size = 0;
    int taps = 0;  // the widest filter, rounded up to a multiple of 4
    int precision = 0;
    std::vector<int32_t> start;
    std::vector<int32_t> count;
    std::vector<int16_t> weights;
    bool identity() const { return in_size == out_size; }
  };
  const Axis& horizontal() const { return h_; }
  const Axis& vertical() const { return v_; }

  // Horizontal tables of the AVX-512 VBMI kernel (four outputs per step): per group of four
  // outputs, 64 byte-permute indices of its first tap pair and, per tap pair, 32 int16 weights.
  struct Vbmi {
    bool ok = false;
    int pairs = 0;
    bool wide = false;  // taps span more than the first 64 bytes: read two windows
    std::vector<uint8_t> offsets;
    std::vector<int16_t> weights;
  };

  class Stream;

 private:
  void Run(const ImageBuffer& in, ImageBuffer& out, Kernel kernel) const;
  // Source rows [y0, y1) of `in` into rows out_y0... of `out`.
  void Horizontal(Kernel kernel, const ImageBuffer& in, int64_t y0, int64_t y1, ImageBuffer& out,
                  int64_t out_y0) const;
  // Output rows [oy0, oy1) from `in`, whose row r holds source row y_offset + r.
  void Vertical(Kernel kernel, const ImageBuffer& in, int64_t y_offset, ImageBuffer& out,
                int64_t oy0, int64_t oy1) const;

  Axis h_, v_;
  std::vector<int16_t> h_simd_weights_;  // per output, per 4 taps: 16 int16 (AVX2 layout)
  bool simd_ok_ = false;
  Vbmi vbmi_;
  bool avx512_ok_ = false;
};

class BicubicResampler::Stream {
 public:
  // Writes into `out`, (re)allocated to the output size with the source's channel order.
  Stream(const BicubicResampler& resampler, ChannelOrder order, ImageBuffer& out);
  Stream(const BicubicResampler& resampler, ChannelOrder order, ImageBuffer& out, Kernel kernel);

  // The next `rows` source rows (next_row() onwards), held in rows 0.. of `strip`, which is
  // in_width wide with the padding every ImageBuffer has.
  void Push(const ImageBuffer& strip, int64_t rows);
  int64_t next_row() const { return next_; }
  // Every output row written (all the source rows the filters read have arrived).
  bool done() const { return next_out_ == r_.v_.out_size; }

 private:
  void Emit();
  void Slide();

  const BicubicResampler& r_;
  ImageBuffer& out_;
  Kernel kernel_;
  int64_t next_ = 0;      // next source row expected
  int64_t need_end_ = 0;  // source rows at or past this are read by no output row
  int64_t next_out_ = 0;  // next output row to write
  // Horizontally filtered source rows [window_first_, window_first_ + window_rows_).
  ImageBuffer window_;
  int64_t window_first_ = 0, window_rows_ = 0;
};

}  // namespace m3::media
