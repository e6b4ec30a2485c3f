// MediaRef: one media item of a request as the gateway takes it in, before anything is
// fetched: its kind, where its bytes are (a URL, or the bytes themselves when the gRPC
// preprocessing service is sent them inline), OpenAI's image detail, and the request field it
// came from, so that every later failure (fetch, decode, limits) names that field.
#pragma once

#include <optional>
#include <string>

#include "gateway/content/media_kind.h"

namespace m3::content {

// OpenAI's image_url.detail: "low" bounds the resize; "auto" and "high" keep the model's own.
enum class ImageDetail { kAuto, kLow, kHigh };

struct MediaRef {
  MediaKind kind = MediaKind::kImage;
  std::string url;                          // http(s), data:, file:// or an absolute path
  std::optional<std::string> bytes;         // inline encoded bytes (gRPC) instead of a URL
  ImageDetail detail = ImageDetail::kAuto;  // images only
  std::string param;  // e.g. "messages[1].content[2].image_url.url", for errors about the item
};

}  // namespace m3::content
