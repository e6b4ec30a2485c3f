// PngDecoder: PNG decoding with libpng straight into RGB, converted the way the reference loader
// (PIL: exif_transpose, then convert("RGB")) does: low-depth grayscale scaled to 0..255,
// 16-bit grayscale clamped to 255 (PIL's I;16 -> RGB), other 16-bit samples reduced to their
// high byte, alpha and tRNS dropped without compositing, palette indices mapped to their PLTE
// colours, gamma/sRGB/iCCP ignored; the eXIf orientation applied afterwards. libpng is used
// without transforms (the conversions are ours) and with its default checks, so the data it
// accepts or refuses (CRCs, truncation, zlib errors) is what the OpenCV path accepted or refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "gateway/media/image_buffer.h"

namespace m3::media {

struct PngInfo {
  int64_t width = 0, height = 0;  // as stored (before orientation)
  int orientation = 1;            // eXIf, 1..8 (as libpng + OpenCV read it)
  bool interlaced = false;        // Adam7: decoded whole, never streamed
};

// Reads the header chunks (up to the image data) and the eXIf orientation. Throws
// kInvalidArgument for data libpng refuses there.
PngInfo ReadPngInfo(std::string_view bytes);

// The eXIf orientation the OpenCV path applied: the first eXIf chunk libpng accepts before the
// image data (intact CRC, "MM"/"II" byte order), else the first after it; 1 when none.
int ReadPngExifOrientation(std::string_view bytes);

// Decodes the whole picture (RGB order) and turns it upright. Returns nullopt when the bytes do
// not start with the PNG signature (not a PNG); throws kInvalidArgument ("PNG: ...") for corrupt
// or truncated data.
std::optional<ImageBuffer> DecodePng(std::string_view bytes);

// DecodePng followed by BicubicResampler::Resize to out_width x out_height (upright), with the
// same pixels, in one pass: strips of decoded rows go through the resampler as they come, so
// the full-size picture is never stored. (Interlaced pictures, and those with an EXIF rotation
// or flip, are decoded whole first.)
std::optional<ImageBuffer> DecodePngResized(std::string_view bytes, int64_t out_width,
                                            int64_t out_height);

}  // namespace m3::media
