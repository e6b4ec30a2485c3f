// The preprocessing service's per-request bounds, all configurable on `serve`. They are
// checked as early as the information exists: the item count and the resize options when the
// request is parsed (before it is queued), pixels and output bytes per item once its header
// is read (before it is decoded), and the deadline across all of a request's fetches.
#pragma once

#include <chrono>
#include <cstdint>

namespace m3::preprocess {

struct PreprocessLimits {
  int64_t max_items = 64;  // image_url / video_url parts in one request
  // Resized pixels of one request, all items and frames together (also bounds a request's
  // max_pixels / min_pixels options).
  int64_t max_pixels = int64_t{16} << 20;
  // Bytes of the output tensors of one request (pixel_values and pixel_values_videos).
  int64_t max_output_bytes = int64_t{256} << 20;
  // All fetches of one request together; each fetch also keeps its own timeout.
  std::chrono::milliseconds request_timeout{60000};
};

}  // namespace m3::preprocess
