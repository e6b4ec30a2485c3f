// ImageBuffer: an 8-bit, 3-channel, interleaved (HWC) picture as decoders produce it. The
// channel order is kept (OpenCV decodes BGR) so no pass is spent swapping channels: consumers
// read channel c through ChannelIndex().
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shared/default_init_allocator.h"

namespace m3::media {

enum class ChannelOrder { kRGB, kBGR };

struct ImageBuffer {
  int64_t width = 0;
  int64_t height = 0;
  ChannelOrder order = ChannelOrder::kRGB;
  // height * width * 3 bytes, plus kPadding readable bytes at the end so vector loads may run
  // past the last pixel (their weights are zero).
  std::vector<uint8_t, DefaultInitAllocator<uint8_t>> pixels;

  static constexpr int64_t kChannels = 3;
  static constexpr int64_t kPadding = 128;

  void Allocate(int64_t w, int64_t h, ChannelOrder o) {
    width = w;
    height = h;
    order = o;
    const size_t bytes = static_cast<size_t>(w * h * kChannels);
    pixels.clear();
    pixels.resize(bytes + kPadding);
    std::memset(pixels.data() + bytes, 0, kPadding);  // read by vector loads: keep defined
  }
  int64_t row_bytes() const { return width * kChannels; }
  uint8_t* row(int64_t y) { return pixels.data() + y * row_bytes(); }
  const uint8_t* row(int64_t y) const { return pixels.data() + y * row_bytes(); }
  // Byte offset within a pixel of RGB channel c (0 = R, 1 = G, 2 = B).
  int ChannelIndex(int c) const { return order == ChannelOrder::kRGB ? c : 2 - c; }
};

}  // namespace m3::media
