// DecodeImage: encoded image bytes -> 8-bit 3-channel pixels, converted the way the reference
// loader (PIL: exif_transpose, then convert("RGB")) does: EXIF orientation applied, alpha
// dropped without compositing, grayscale and palette expanded, 16-bit samples reduced like
// PIL (RGB/RGBA/LA: the high byte; plain 16-bit grayscale: clamped to 255). WebP, BMP and TIFF
// decode with OpenCV; GIF (first frame) with FFmpeg; JPEG with libjpeg-turbo (see
// jpeg_decoder.h; CMYK JPEGs with OpenCV); PNG with libpng (see png_decoder.h).
#pragma once

#include <string_view>

#include "gateway/media/image_buffer.h"
#include "gateway/media/image_header.h"
#include "gateway/media/media_options.h"

namespace cv {
class Mat;
}

namespace m3::media {

// Copies an 8-bit BGR OpenCV image (what imdecode and imread give) into an ImageBuffer.
ImageBuffer ImageBufferFromBgrMat(const cv::Mat& bgr);

// `header` is ReadImageHeader(bytes), already checked against the limits. Throws
// kInvalidArgument for corrupt or truncated data.
ImageBuffer DecodeImage(std::string_view bytes, const ImageHeader& header,
                        const MediaLimits& limits);

}  // namespace m3::media
