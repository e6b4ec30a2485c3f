// ContentPart: one part of a chat message's content list, read by the one reader every API
// uses: chat completions (which refuses every defect), /v1/preprocess (which takes the media
// parts and skips the others), and prompt assembly and `m3-gateway prepare` (which need only
// the media parts and their URLs). The grammar:
//   {"type": "text", "text": "..."}
//   {"type": "image_url", "image_url": {"url": "...", "detail": "auto" | "low" | "high"}}
//   {"type": "image_url", "image_url": "..."}  (the shorthand some clients send)
//   {"type": "video_url", "video_url": {"url": "..."}} or "video_url": "..."
//   {"type": "image" | "video", "image" | "video": URL or {"url": URL}} or {"url": URL}: the
//   Hugging Face processor's parts (what chat templates are given; only prompt assembly and
//   `prepare` take them).
// Reading never throws: it returns the part's type and its first defect with the field it is
// about, and each API words the defect in its own error style (each API's wording is part of
// its contract).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/content/media_ref.h"

namespace m3::content {

enum class PartType { kText, kImageUrl, kVideoUrl, kImage, kVideo, kOther };

// The media kind of a media part type; nullopt for text and other parts.
std::optional<MediaKind> MediaKindOf(PartType type);

struct PartDefect {
  enum class Field { kPart, kType, kText, kMedia, kUrl, kDetail };
  enum class Problem {
    kMissing,    // absent, or null (`got` tells which)
    kWrongType,  // another JSON type (`got` names it)
    kEmpty,      // an empty URL
    kBadValue,   // a detail other than auto, low and high (`value` holds it)
  };
  Field field = Field::kPart;
  Problem problem = Problem::kMissing;
  std::string param;     // the field's full path, e.g. "messages[0].content[1].image_url.url"
  std::string_view got;  // the JSON type found ("null" for null, empty when absent)
  std::string value;     // kBadValue: the value as sent
};

struct ContentPart {
  PartType type = PartType::kOther;
  std::string type_name;             // "type" as sent (empty when it is not a string)
  std::optional<PartDefect> defect;  // the first, in the order of the grammar above
  // Media parts: kind, URL and param, read up to the first defect. The detail is read last,
  // so callers that ignore it take the item despite a detail defect.
  MediaRef media;
};

// The part at `path` (e.g. "messages[1].content[2]"). From a mutable part the URL string is
// moved out (a data: URI can be most of a request body); from a const one it is copied.
ContentPart ReadContentPart(const nlohmann::ordered_json& part, const std::string& path);
ContentPart ReadContentPart(nlohmann::json& part, const std::string& path);

// Only the type (kOther for a part that is not an object or has no string "type").
PartType ContentPartType(const nlohmann::ordered_json& part);

}  // namespace m3::content
