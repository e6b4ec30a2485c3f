// content::ReadContentPart: the part forms it takes, the first defect it reports (field,
// problem, path, the JSON type found), and the URL moved out of a mutable part.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "gateway/content/content_part.h"

using namespace m3::content;
using Field = PartDefect::Field;
using Problem = PartDefect::Problem;
using Json = nlohmann::ordered_json;

namespace {

ContentPart Read(const char* part) {
  return ReadContentPart(Json::parse(part), "messages[1].content[2]");
}

void CheckDefect(const ContentPart& p, Field field, Problem problem, const std::string& param,
                 std::string_view got = {}) {
  REQUIRE(p.defect.has_value());
  CHECK(p.defect->field == field);
  CHECK(p.defect->problem == problem);
  CHECK(p.defect->param == param);
  CHECK(p.defect->got == got);
}

}  // namespace

TEST_CASE("text, image_url and video_url parts") {
  ContentPart text = Read(R"({"type": "text", "text": "hi"})");
  CHECK(text.type == PartType::kText);
  CHECK_FALSE(text.defect);

  ContentPart image =
      Read(R"({"type": "image_url", "image_url": {"url": "http://h/a.png", "detail": "low"}})");
  CHECK(image.type == PartType::kImageUrl);
  CHECK_FALSE(image.defect);
  CHECK(image.media.kind == MediaKind::kImage);
  CHECK(image.media.url == "http://h/a.png");
  CHECK(image.media.detail == ImageDetail::kLow);
  CHECK(image.media.param == "messages[1].content[2].image_url.url");

  ContentPart shorthand = Read(R"({"type": "video_url", "video_url": "http://h/v.mp4"})");
  CHECK(shorthand.type == PartType::kVideoUrl);
  CHECK_FALSE(shorthand.defect);
  CHECK(shorthand.media.kind == MediaKind::kVideo);
  CHECK(shorthand.media.url == "http://h/v.mp4");
  CHECK(shorthand.media.param == "messages[1].content[2].video_url");

  ContentPart other = Read(R"({"type": "input_audio", "input_audio": {}})");
  CHECK(other.type == PartType::kOther);
  CHECK(other.type_name == "input_audio");
  CHECK_FALSE(other.defect);
}

TEST_CASE("Hugging Face image and video parts") {
  ContentPart named = Read(R"({"type": "image", "image": "a.png"})");
  CHECK(named.type == PartType::kImage);
  CHECK(named.media.url == "a.png");
  CHECK(named.media.param == "messages[1].content[2].image");
  ContentPart url = Read(R"({"type": "video", "url": "v.mp4"})");
  CHECK(url.media.kind == MediaKind::kVideo);
  CHECK(url.media.url == "v.mp4");
  CHECK(url.media.param == "messages[1].content[2].url");
  CheckDefect(Read(R"({"type": "image"})"), Field::kUrl, Problem::kMissing,
              "messages[1].content[2].url");
}

TEST_CASE("the first defect, with its field, path and the type found") {
  const std::string at = "messages[1].content[2]";
  CheckDefect(Read("5"), Field::kPart, Problem::kWrongType, at, "integer");
  CheckDefect(Read(R"({"text": "x"})"), Field::kType, Problem::kMissing, at + ".type");
  CheckDefect(Read(R"({"type": null})"), Field::kType, Problem::kMissing, at + ".type", "null");
  CheckDefect(Read(R"({"type": ["text"]})"), Field::kType, Problem::kWrongType, at + ".type",
              "array");
  CheckDefect(Read(R"({"type": "text"})"), Field::kText, Problem::kMissing, at + ".text");
  CheckDefect(Read(R"({"type": "text", "text": 1.5})"), Field::kText, Problem::kWrongType,
              at + ".text", "number");
  CheckDefect(Read(R"({"type": "image_url"})"), Field::kMedia, Problem::kMissing,
              at + ".image_url");
  CheckDefect(Read(R"({"type": "image_url", "image_url": null})"), Field::kMedia, Problem::kMissing,
              at + ".image_url", "null");
  CheckDefect(Read(R"({"type": "video_url", "video_url": 5})"), Field::kMedia, Problem::kWrongType,
              at + ".video_url", "integer");
  CheckDefect(Read(R"({"type": "image_url", "image_url": ""})"), Field::kMedia, Problem::kEmpty,
              at + ".image_url");
  CheckDefect(Read(R"({"type": "image_url", "image_url": {}})"), Field::kUrl, Problem::kMissing,
              at + ".image_url.url");
  CheckDefect(Read(R"({"type": "image_url", "image_url": {"url": true}})"), Field::kUrl,
              Problem::kWrongType, at + ".image_url.url", "boolean");
  CheckDefect(Read(R"({"type": "image_url", "image_url": {"url": ""}})"), Field::kUrl,
              Problem::kEmpty, at + ".image_url.url");

  // The detail is read last: the item is complete despite its defect.
  ContentPart detail = Read(R"({"type": "image_url", "image_url": {"url": "u", "detail": "max"}})");
  CheckDefect(detail, Field::kDetail, Problem::kBadValue, at + ".image_url.detail", "string");
  CHECK(detail.defect->value == "max");
  CHECK(detail.media.url == "u");
  CheckDefect(Read(R"({"type": "image_url", "image_url": {"url": "u", "detail": 1}})"),
              Field::kDetail, Problem::kWrongType, at + ".image_url.detail", "integer");
}

TEST_CASE("a mutable part gives up its URL; a const one keeps it") {
  nlohmann::json part = nlohmann::json::parse(
      R"({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})");
  ContentPart moved = ReadContentPart(part, "content[0]");
  CHECK(moved.media.url == "data:image/png;base64,AAAA");
  CHECK(part["image_url"]["url"].get<std::string>().empty());

  const Json kept = Json::parse(R"({"type": "image_url", "image_url": "u"})");
  CHECK(ReadContentPart(kept, "content[0]").media.url == "u");
  CHECK(kept["image_url"] == "u");
  CHECK(ContentPartType(kept) == PartType::kImageUrl);
  CHECK(ContentPartType(Json::parse("[1]")) == PartType::kOther);
}
