// EXIF orientation: reading the Orientation tag (0x0112) from a JPEG's APP1 "Exif" segment (or a
// PNG's eXIf chunk, a WebP's EXIF chunk) and
// turning decoded pixels upright the way PIL's ImageOps.exif_transpose does (all 8 values).
#pragma once

#include <string_view>

#include "gateway/media/image_buffer.h"

namespace m3::media {

// 1..8 from the first APP1 Exif segment before the scan data; 1 (upright) when there is none
// or it is malformed (a bad tag never fails an otherwise decodable image).
int ReadJpegExifOrientation(std::string_view jpeg);

// The same from a bare TIFF structure (a PNG eXIf chunk's payload); 1 when malformed.
int ReadTiffExifOrientation(std::string_view tiff);

// The same from a WebP's EXIF chunk (its TIFF body, with or without an "Exif\0\0" prefix); 1
// when there is none or it is malformed. libwebp ignores it; PIL's exif_transpose does not.
int ReadWebpExifOrientation(std::string_view webp);

// True for orientations 5..8, which swap width and height.
inline bool OrientationSwapsAxes(int orientation) {
  return orientation >= 5 && orientation <= 8;
}

// `in` turned upright for `orientation` (returned unchanged for 1 or unknown values).
ImageBuffer ApplyExifOrientation(ImageBuffer in, int orientation);

}  // namespace m3::media
