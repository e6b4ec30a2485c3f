// How an image part's "detail" (OpenAI: "low", "high", "auto") maps to the vision processor's
// resize bounds. "low" caps the image at kLowDetailMaxPixels (512 x 512, the size OpenAI's low
// detail works at), so a low-detail image costs at most (512/28)^2 ~ 334 placeholder tokens on
// M3's 28-pixel merged patches; "high" and "auto" keep the processor's own bounds
// (processor_config.json), the resolution the model was trained at. The processor's min_pixels
// still applies (M3's default, 3136, is far below the cap).
#pragma once

#include <cstdint>

#include "gateway/content/media_ref.h"
#include "gateway/media/media_options.h"

namespace m3::api {

inline constexpr int64_t kLowDetailMaxPixels = 512 * 512;

media::MediaOptions MediaOptionsForDetail(content::ImageDetail detail);

}  // namespace m3::api
