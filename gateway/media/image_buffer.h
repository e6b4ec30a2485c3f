// ImageBuffer: an 8-bit, 3-channel, interleaved (HWC) picture as decoders produce it. The
// channel order is kept (OpenCV decodes BGR) so no pass is spent swapping channels: consumers
// read channel c through ChannelIndex().
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace m3::media {

enum class ChannelOrder { kRGB, kBGR };

// Leaves new bytes uninitialized: every pixel is written by a decoder or kernel right after
// allocation, so zero-filling megabytes first would only cost time.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

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
