// The one reader of chat content parts (see content_part.h).
#include "gateway/content/content_part.h"

#include <type_traits>
#include <utility>

#include "gateway/content/json_type_name.h"

namespace m3::content {
namespace {

using Field = PartDefect::Field;
using Problem = PartDefect::Problem;

PartType TypeNamed(std::string_view t) {
  if (t == "text") return PartType::kText;
  if (t == "image_url") return PartType::kImageUrl;
  if (t == "video_url") return PartType::kVideoUrl;
  if (t == "image") return PartType::kImage;
  if (t == "video") return PartType::kVideo;
  return PartType::kOther;
}

// `Json` is a (possibly const) nlohmann JSON type; the member's constness follows it.
template <typename Json>
Json* Member(Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

template <typename Json>
std::string Take(Json& string_value) {
  if constexpr (std::is_const_v<Json>) {
    return string_value.template get<std::string>();
  } else {
    return std::move(string_value.template get_ref<std::string&>());
  }
}

void Fail(ContentPart& out, Field field, Problem problem, std::string param,
          std::string_view got = {}, std::string value = {}) {
  out.defect = PartDefect{field, problem, std::move(param), got, std::move(value)};
}

// kMissing for an absent or null member.
template <typename Json>
bool Missing(ContentPart& out, const Json* member, Field field, const std::string& param) {
  if (member && !member->is_null()) return false;
  Fail(out, field, Problem::kMissing, param, member ? "null" : "");
  return true;
}

template <typename Json>
void ReadDetail(Json& media, const std::string& media_path, ContentPart& out) {
  const auto* detail = Member(media, "detail");
  if (!detail || detail->is_null()) return;
  const std::string path = media_path + ".detail";
  if (!detail->is_string())
    return Fail(out, Field::kDetail, Problem::kWrongType, path, JsonTypeName(*detail));
  const auto& d = detail->template get_ref<const std::string&>();
  if (d == "auto") {
    out.media.detail = ImageDetail::kAuto;
  } else if (d == "low") {
    out.media.detail = ImageDetail::kLow;
  } else if (d == "high") {
    out.media.detail = ImageDetail::kHigh;
  } else {
    Fail(out, Field::kDetail, Problem::kBadValue, path, "string", d);
  }
}

// "image_url" / "video_url" parts: the URL string, or an object with "url" (and "detail").
template <typename Json>
void ReadUrlPart(Json& part, const std::string& path, ContentPart& out) {
  const std::string media_path = path + "." + out.type_name;
  Json* media = Member(part, out.type_name.c_str());
  if (Missing(out, media, Field::kMedia, media_path)) return;
  if (media->is_string()) {
    out.media.param = media_path;
    out.media.url = Take(*media);
    if (out.media.url.empty()) Fail(out, Field::kMedia, Problem::kEmpty, media_path);
    return;
  }
  if (!media->is_object()) {
    return Fail(out, Field::kMedia, Problem::kWrongType, media_path, JsonTypeName(*media));
  }
  const std::string url_path = media_path + ".url";
  Json* url = Member(*media, "url");
  if (Missing(out, url, Field::kUrl, url_path)) return;
  if (!url->is_string()) {
    return Fail(out, Field::kUrl, Problem::kWrongType, url_path, JsonTypeName(*url));
  }
  out.media.param = url_path;
  out.media.url = Take(*url);
  if (out.media.url.empty()) return Fail(out, Field::kUrl, Problem::kEmpty, url_path);
  if (out.media.kind == MediaKind::kImage) ReadDetail(*media, media_path, out);
}

// Hugging Face "image" / "video" parts: the URL under the kind's name (a string or {"url"}),
// else under "url".
template <typename Json>
void ReadProcessorPart(Json& part, const std::string& path, ContentPart& out) {
  const std::string key = out.type_name;
  Json* url = nullptr;
  std::string param = path + "." + key;
  if (Json* media = Member(part, key.c_str())) {
    if (media->is_string()) {
      url = media;
    } else if (media->is_object()) {
      url = Member(*media, "url");
      param += ".url";
      if (url && !url->is_string()) url = nullptr;
    }
  }
  if (!url) {
    param = path + ".url";
    url = Member(part, "url");
    if (url && !url->is_string()) url = nullptr;
  }
  if (!url) return Fail(out, Field::kUrl, Problem::kMissing, param);
  out.media.param = param;
  out.media.url = Take(*url);
  if (out.media.url.empty()) Fail(out, Field::kUrl, Problem::kEmpty, param);
}

template <typename Json>
ContentPart Read(Json& part, const std::string& path) {
  ContentPart out;
  if (!part.is_object()) {
    Fail(out, Field::kPart, Problem::kWrongType, path, JsonTypeName(part));
    return out;
  }
  const std::string type_path = path + ".type";
  Json* type = Member(part, "type");
  if (Missing(out, type, Field::kType, type_path)) return out;
  if (!type->is_string()) {
    Fail(out, Field::kType, Problem::kWrongType, type_path, JsonTypeName(*type));
    return out;
  }
  out.type_name = type->template get<std::string>();
  out.type = TypeNamed(out.type_name);
  if (out.type == PartType::kText) {
    const std::string text_path = path + ".text";
    Json* text = Member(part, "text");
    if (!Missing(out, text, Field::kText, text_path) && !text->is_string()) {
      Fail(out, Field::kText, Problem::kWrongType, text_path, JsonTypeName(*text));
    }
    return out;
  }
  const std::optional<MediaKind> kind = MediaKindOf(out.type);
  if (!kind) return out;
  out.media.kind = *kind;
  if (out.type == PartType::kImageUrl || out.type == PartType::kVideoUrl) {
    ReadUrlPart(part, path, out);
  } else {
    ReadProcessorPart(part, path, out);
  }
  return out;
}

}  // namespace

std::optional<MediaKind> MediaKindOf(PartType type) {
  switch (type) {
    case PartType::kImageUrl:
    case PartType::kImage:
      return MediaKind::kImage;
    case PartType::kVideoUrl:
    case PartType::kVideo:
      return MediaKind::kVideo;
    case PartType::kText:
    case PartType::kOther:
      break;
  }
  return std::nullopt;
}

ContentPart ReadContentPart(const nlohmann::ordered_json& part, const std::string& path) {
  return Read(part, path);
}

ContentPart ReadContentPart(nlohmann::json& part, const std::string& path) {
  return Read(part, path);
}

PartType ContentPartType(const nlohmann::ordered_json& part) {
  if (!part.is_object()) return PartType::kOther;
  auto type = part.find("type");
  if (type == part.end() || !type->is_string()) return PartType::kOther;
  return TypeNamed(type->get_ref<const std::string&>());
}

}  // namespace m3::content
