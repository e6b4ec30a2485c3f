// JpegDecoder: JPEG decoding with libjpeg-turbo straight into RGB, with the settings PIL's
// JPEG plugin uses by default (ISLOW integer IDCT, fancy upsampling) so the pixels equal what
// the reference sees, optional DCT-domain downscaling (PIL's Image.draft), and the EXIF
// orientation applied afterwards. libjpeg decodes a truncated stream without an error (the
// missing rows turn gray), so callers check the structure first: ReadImageHeader refuses a JPEG
// whose segments do not reach an end-of-image marker.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "gateway/media/image_buffer.h"

namespace m3::media {

struct JpegInfo {
  int64_t width = 0, height = 0;  // as stored (before orientation)
  int orientation = 1;            // EXIF, 1..8
  bool cmyk = false;              // CMYK/YCCK: not decoded here
};

// Reads the frame header and the EXIF orientation. Throws kInvalidArgument for data libjpeg
// cannot parse.
JpegInfo ReadJpegInfo(std::string_view bytes);

// The largest reduction (8, 4, 2 or 1) that keeps the decoded size at least
// min_width x min_height in both dimensions (sizes as stored, before orientation).
int JpegDraftDenominator(int64_t width, int64_t height, int64_t min_width, int64_t min_height);

// Decodes at 1/scale_denom (1, 2, 4 or 8) of the stored size and turns the result upright.
// Returns nullopt for CMYK/YCCK JPEGs (the caller's other decoder handles them); throws
// kInvalidArgument for corrupt data.
std::optional<ImageBuffer> DecodeJpeg(std::string_view bytes, int scale_denom = 1);

// DecodeJpeg followed by BicubicResampler::Resize to out_width x out_height (upright), with the
// same pixels, in one pass: strips of decoded rows go through the resampler as they come, so
// the full-size picture is never stored. (Pictures with an EXIF rotation or flip are decoded
// whole first: the resize must see them upright.)
std::optional<ImageBuffer> DecodeJpegResized(std::string_view bytes, int64_t out_width,
                                             int64_t out_height, int scale_denom = 1);

}  // namespace m3::media
