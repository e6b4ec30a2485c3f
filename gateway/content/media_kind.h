// MediaKind: what a request's media item is, an image or a video. One enum for the whole
// gateway: the content-part reader sets it, the fetcher checks the bytes against it, the
// media preprocessor's output carries it, and the prompt builder places items by it.
#pragma once

#include <string_view>

namespace m3::content {

enum class MediaKind { kImage, kVideo };

// "image" / "video": how messages and metrics name the kind.
constexpr std::string_view MediaKindName(MediaKind kind) {
  return kind == MediaKind::kImage ? "image" : "video";
}

}  // namespace m3::content
