// image_url.detail -> resize bounds (see image_detail.h).
#include "gateway/api/image_detail.h"

namespace m3::api {

media::MediaOptions MediaOptionsForDetail(content::ImageDetail detail) {
  media::MediaOptions options;
  if (detail == content::ImageDetail::kLow) options.max_pixels = kLowDetailMaxPixels;
  return options;
}

}  // namespace m3::api
