// Parsing of /v1/preprocess request bodies (see preprocess_request.h).
#include "gateway/preprocess/preprocess_request.h"

#include "gateway/content/content_part.h"
#include "gateway/net/api_error.h"
#include "gateway/net/request_json.h"

namespace m3::preprocess {
namespace {

using nlohmann::json;

[[noreturn]] void Bad(const std::string& param, const std::string& message) {
  throw net::ParamError(ErrorCode::kInvalidArgument, message, param);
}

// A media part's defect in this API's words; the other parts' defects are not this API's.
[[noreturn]] void Refuse(const content::ContentPart& part, const std::string& at) {
  using Field = content::PartDefect::Field;
  using Problem = content::PartDefect::Problem;
  const content::PartDefect& d = *part.defect;
  const std::string field = at + "." + part.type_name;
  if (d.problem == Problem::kEmpty) Bad(d.param, "'" + d.param + "' is empty");
  if (d.field == Field::kMedia && d.problem == Problem::kMissing && d.got.empty()) {
    Bad(field, "'" + at + "' has no '" + part.type_name + "' field");
  }
  Bad(field + ".url", "'" + field + ".url' must be a string");
}

void CollectParts(json& parts, const std::string& where, std::vector<content::MediaRef>& out) {
  using Field = content::PartDefect::Field;
  if (parts.is_string() || parts.is_null()) return;  // plain text message
  if (!parts.is_array()) Bad(where, "'" + where + "' must be an array of content parts");
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    content::ContentPart part = content::ReadContentPart(parts[i], at);
    if (part.defect && part.defect->field == Field::kPart)
      Bad(at, "'" + at + "' must be an object");
    if (part.defect && part.defect->field == Field::kType) {
      Bad(at + ".type", "'" + at + ".type' must be a string");
    }
    // Text and other parts carry no media.
    if (part.type != content::PartType::kImageUrl && part.type != content::PartType::kVideoUrl) {
      continue;
    }
    if (part.defect && part.defect->field != Field::kDetail) Refuse(part, at);
    out.push_back(std::move(part.media));
  }
}

std::optional<int64_t> PositiveInt(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
    Bad(name, std::string("'") + name + "' must be a positive integer");
  }
  return it->get<int64_t>();
}

PreprocessRequest Parse(json& body) {
  if (!body.is_object()) Bad("", "the request body must be a JSON object");
  PreprocessRequest req;
  bool has_content = body.contains("content"), has_messages = body.contains("messages");
  if (!has_content && !has_messages) Bad("content", "the request needs 'content' or 'messages'");
  if (has_content) CollectParts(body["content"], "content", req.items);
  if (has_messages) {
    json& messages = body["messages"];
    if (!messages.is_array()) Bad("messages", "'messages' must be an array");
    for (size_t i = 0; i < messages.size(); ++i) {
      std::string at = "messages[" + std::to_string(i) + "]";
      if (!messages[i].is_object()) Bad(at, "'" + at + "' must be an object");
      if (messages[i].contains("content"))
        CollectParts(messages[i]["content"], at + ".content", req.items);
    }
  }
  if (req.items.empty()) Bad("content", "the request contains no image_url or video_url parts");

  req.options.min_pixels = PositiveInt(body, "min_pixels");
  req.options.max_pixels = PositiveInt(body, "max_pixels");
  req.options.min_frames = PositiveInt(body, "min_frames");
  req.options.max_frames = PositiveInt(body, "max_frames");
  if (auto it = body.find("fps"); it != body.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() <= 0) Bad("fps", "'fps' must be a positive number");
    req.options.fps = it->get<double>();
  }
  if (auto it = body.find("all_frames"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) Bad("all_frames", "'all_frames' must be a boolean");
    req.options.all_frames = it->get<bool>();
  }
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    std::string f = it->is_string() ? it->get<std::string>() : "";
    if (f == "safetensors")
      req.format = ResponseFormat::kSafetensors;
    else if (f == "json")
      req.format = ResponseFormat::kJson;
    else
      Bad("response_format", "'response_format' must be \"safetensors\" or \"json\"");
  }
  return req;
}

}  // namespace

PreprocessRequest ParsePreprocessRequest(std::string_view body_text) {
  json body = net::ParseRequestJson(body_text);
  // The media URLs (data: URIs can be most of the body) move out instead of being copied.
  return ParsePreprocessRequest(std::move(body));
}

PreprocessRequest ParsePreprocessRequest(json&& body) {
  return Parse(body);
}

PreprocessRequest ParsePreprocessRequest(const json& body) {
  json copy = body;
  return Parse(copy);
}

}  // namespace m3::preprocess
