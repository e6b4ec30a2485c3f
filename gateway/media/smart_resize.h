// SmartResize: the Qwen2-VL-family size rule MiniMax-M3 uses. Both sides become multiples
// of `factor` (patch size x merge size), the pixel count lands in [min_pixels, max_pixels],
// and the aspect ratio is kept as closely as possible; ratios over 200 are refused.
#pragma once

#include <cstdint>

#include "gateway/media/vision_processor.h"

namespace m3::media {

// Throws kInvalidArgument for non-positive sizes or an aspect ratio over 200.
ResizeTarget SmartResize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                         int64_t max_pixels);

}  // namespace m3::media
