// The preprocessing request: which media to process (in order) and with which options, parsed
// from the /v1/preprocess JSON body. Items are OpenAI chat content parts ("image_url" /
// "video_url"), given as "content": [...] or inside "messages": [{"content": [...]}].
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/media/media_options.h"
#include "gateway/net/media_sniffer.h"

namespace m3::net {

struct MediaRef {
  MediaKind kind = MediaKind::kImage;
  std::string url;                   // http(s), data:, file:// or absolute path
  std::optional<std::string> bytes;  // inline encoded bytes (gRPC) instead of a URL
  std::string param;                 // where it came from, e.g. "content[1].image_url.url"
};

enum class ResponseFormat { kSafetensors, kJson };

struct PreprocessRequest {
  std::vector<MediaRef> items;
  media::MediaOptions options;
  ResponseFormat format = ResponseFormat::kSafetensors;
};

// Throws ParamError (kInvalidArgument) naming the offending field.
PreprocessRequest ParsePreprocessRequest(const nlohmann::json& body);
// Parses the body text first (ParseRequestJson: bounded depth); malformed JSON is a
// kInvalidArgument ParamError.
PreprocessRequest ParsePreprocessRequest(std::string_view body_text);
PreprocessRequest ParsePreprocessRequest(nlohmann::json&& body);
// Text, not a JSON string value (a std::string converts to both).
inline PreprocessRequest ParsePreprocessRequest(const std::string& body_text) {
  return ParsePreprocessRequest(std::string_view(body_text));
}

}  // namespace m3::net
