// SmartResize, with the reference's rounding: Python's round() (half to even) for the first
// guess, at least one factor per side, floor when shrinking to max_pixels, ceil when growing to
// min_pixels.
#include "gateway/media/smart_resize.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "shared/error.h"

namespace m3::media {

ResizeTarget SmartResize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                         int64_t max_pixels) {
  Require(
      height > 0 && width > 0, ErrorCode::kInvalidArgument,
      "image size must be positive, got " + std::to_string(width) + "x" + std::to_string(height));
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  const double ratio = std::max(h, w) / std::min(h, w);
  Require(ratio <= 200.0, ErrorCode::kInvalidArgument,
          "absolute aspect ratio must be at most 200, got " + std::to_string(ratio) + " (" +
              std::to_string(width) + "x" + std::to_string(height) + ")");
  const double f = static_cast<double>(factor);
  // std::nearbyint rounds half to even in the default rounding mode, like Python's round(). A side
  // under half a factor rounds to 0; the reference raises it to one factor before the pixel
  // checks, so a 13 x 1000 picture stays 28 x 1008 rather than being grown as if it were empty.
  double h_bar = std::max(f, std::nearbyint(h / f) * f);
  double w_bar = std::max(f, std::nearbyint(w / f) * f);
  if (h_bar * w_bar > static_cast<double>(max_pixels)) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    h_bar = std::max(f, std::floor(h / beta / f) * f);
    w_bar = std::max(f, std::floor(w / beta / f) * f);
  } else if (h_bar * w_bar < static_cast<double>(min_pixels)) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = std::ceil(h * beta / f) * f;
    w_bar = std::ceil(w * beta / f) * f;
  }
  return {static_cast<int64_t>(h_bar), static_cast<int64_t>(w_bar)};
}

}  // namespace m3::media
