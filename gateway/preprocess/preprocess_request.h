// The preprocessing request: which media to process (in order) and with which options, parsed
// from the /v1/preprocess JSON body. Items are OpenAI chat content parts ("image_url" /
// "video_url", read by content::ReadContentPart; other parts are skipped), given as
// "content": [...] or inside "messages": [{"content": [...]}].
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/content/media_ref.h"
#include "gateway/media/media_options.h"

namespace m3::preprocess {

enum class ResponseFormat { kSafetensors, kJson };

struct PreprocessRequest {
  std::vector<content::MediaRef> items;
  media::MediaOptions options;
  ResponseFormat format = ResponseFormat::kSafetensors;
};

// Throws net::ParamError (kInvalidArgument) naming the offending field.
PreprocessRequest ParsePreprocessRequest(const nlohmann::json& body);
// Parses the body text first (net::ParseRequestJson: bounded depth); malformed JSON is a
// kInvalidArgument net::ParamError.
PreprocessRequest ParsePreprocessRequest(std::string_view body_text);
PreprocessRequest ParsePreprocessRequest(nlohmann::json&& body);
// Text, not a JSON string value (a std::string converts to both).
inline PreprocessRequest ParsePreprocessRequest(const std::string& body_text) {
  return ParsePreprocessRequest(std::string_view(body_text));
}

}  // namespace m3::preprocess
