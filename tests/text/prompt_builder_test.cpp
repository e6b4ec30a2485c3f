// PromptBuilder: M3 VL prompts with images and videos on the MiniMax-M2 chat template and the
// MiniMax test tokenizer: placeholder runs land where the media parts were, spans and counts
// are right, and every inconsistency is an error naming the item. The expected prompt texts
// were rendered with Python jinja2 (trim_blocks, lstrip_blocks), as apply_chat_template does.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "gateway/text/prompt_builder.h"
#include "shared/error.h"
#include "tests/test_util.h"

using m3::content::MediaKind;
using m3::text::AssembledPrompt;
using m3::text::MediaExpansion;
using m3::text::PromptBuilder;
using m3::text::PromptInput;
using m3::tok::Tokenizer;
using Json = nlohmann::ordered_json;

namespace {

const std::string kStart = "]<]start of image[>[", kEnd = "]<]end of image[>[";
const std::string kImage = "]<]image[>[", kVideo = "]<]video[>[";

std::string Repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

MediaExpansion Image(size_t n) {
  return {MediaKind::kImage, kStart + Repeat(kImage, n) + kEnd, n};
}

MediaExpansion Video(size_t groups, size_t per_group) {
  std::string text;
  for (size_t g = 0; g < groups; ++g) {
    text +=
        "]<]" + std::to_string(2 * g) + ".0 seconds[>[" + kStart + Repeat(kVideo, per_group) + kEnd;
  }
  return {MediaKind::kVideo, text, groups * per_group};
}

const Tokenizer& Tok() {
  static const Tokenizer tok = Tokenizer::FromFile(m3::test::DataPath("tokenizer/tokenizer.json"));
  return tok;
}

PromptBuilder M2Builder() {
  auto source = m3::test::ReadFile(m3::test::DataPath("chat_templates/MiniMax-M2.jinja"));
  return PromptBuilder(m3::tmpl::ChatTemplate::Parse(source, "MiniMax-M2.jinja"), Tok());
}

int32_t Id(const std::string& token) {
  return *Tok().TokenToId(token);
}

void CheckImageSpan(const AssembledPrompt& p, size_t item, size_t n) {
  const auto& s = p.media[item];
  CHECK(s.kind == MediaKind::kImage);
  CHECK(s.num_placeholders == n);
  CHECK(s.end - s.begin == n);
  REQUIRE(s.runs.size() == 1);
  CHECK(s.runs[0] == std::make_pair(s.begin, s.end));
  REQUIRE(s.begin > 0);
  CHECK(p.ids[s.begin - 1] == Id(kStart));
  CHECK(p.ids[s.end] == Id(kEnd));
  for (size_t k = s.begin; k < s.end; ++k) CHECK(p.ids[k] == Id(kImage));
}

Json UserWithMedia() {
  return Json::parse(R"([{"role": "user", "content": [
    {"type": "text", "text": "Describe "},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    {"type": "text", "text": " and "},
    {"type": "video_url", "video_url": {"url": "file:///clip.mp4"}}]}])");
}

}  // namespace

TEST_CASE("an image and a video in one user message") {
  PromptInput in;
  in.messages = UserWithMedia();
  std::vector<MediaExpansion> media = {Image(6), Video(2, 4)};
  AssembledPrompt p = M2Builder().Build(in, media);

  const std::string expected =
      "]~!b[]~b]system\nYou are a helpful assistant.[e~[\n]~b]user\nDescribe " + media[0].text +
      " and " + media[1].text + "[e~[\n]~b]ai\n<think>\n";
  CHECK(p.text == expected);
  CHECK(p.ids == Tok().Encode(expected));
  CHECK(p.ids[0] == Id("]~!b["));
  REQUIRE(p.media.size() == 2);
  CheckImageSpan(p, 0, 6);

  const auto& v = p.media[1];
  CHECK(v.kind == MediaKind::kVideo);
  CHECK(v.num_placeholders == 8);
  REQUIRE(v.runs.size() == 2);
  for (const auto& [b, e] : v.runs) {
    CHECK(e - b == 4);
    CHECK(p.ids[b - 1] == Id(kStart));
    CHECK(p.ids[e] == Id(kEnd));
    for (size_t k = b; k < e; ++k) CHECK(p.ids[k] == Id(kVideo));
  }
  CHECK(v.begin == v.runs[0].first);
  CHECK(v.end == v.runs[1].second);
  CHECK(Tok().Decode(std::span<const int32_t>(p.ids).subspan(v.runs[0].second,
                                                             v.runs[1].first - v.runs[0].second)) ==
        kEnd + "]<]2.0 seconds[>[" + kStart);
}

TEST_CASE("system prompt, tools, several turns, media in a later turn") {
  PromptInput in;
  in.messages = Json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                                 {"type": "text", "text": "what?"},
                                 {"type": "image_url", "image_url": {"url": "https://x/b.png"}}]}])");
  in.tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])");
  std::vector<MediaExpansion> media = {Image(4), Image(1)};
  AssembledPrompt p = M2Builder().Build(in, media);
  const std::string expected =
      "]~!b[]~b]system\nBe brief.\n\n# Tools\nYou may call one or more tools to assist with the "
      "user query.\nHere are the tools available in JSONSchema "
      "format:\n\n<tools>\n<tool>{\"name\": "
      "\"f\", \"parameters\": {}}</tool>\n</tools>\n\nWhen making tool calls, use XML format to "
      "invoke tools and pass parameters:\n\n<minimax:tool_call>\n<invoke "
      "name=\"tool-name-1\">\n<parameter "
      "name=\"param-key-1\">param-value-1</parameter>\n<parameter "
      "name=\"param-key-2\">param-value-2</parameter>\n...\n</invoke>\n</"
      "minimax:tool_call>[e~[\n]~b]"
      "user\nhi[e~[\n]~b]ai\nhello[e~[\n]~b]user\n" +
      media[0].text + "what?" + media[1].text + "[e~[\n]~b]ai\n<think>\n";
  CHECK(p.text == expected);
  CHECK(p.ids == Tok().Encode(expected));
  REQUIRE(p.media.size() == 2);
  CheckImageSpan(p, 0, 4);
  CheckImageSpan(p, 1, 1);
  CHECK(p.media[0].end < p.media[1].begin);
}

TEST_CASE("FindMediaParts lists media in order of appearance") {
  auto parts = m3::text::FindMediaParts(Json::parse(R"([
    {"role": "system", "content": "s"},
    {"role": "user", "content": [{"type": "text", "text": "a"},
                                 {"type": "video_url", "video_url": {"url": "v1"}},
                                 {"type": "image_url", "image_url": "i1"}]},
    {"role": "user", "content": [{"type": "image", "image": "i2"}]}])"));
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].kind == MediaKind::kVideo);
  CHECK(parts[0].url == "v1");
  CHECK(parts[0].message_index == 1);
  CHECK(parts[0].part_index == 1);
  CHECK(parts[1].url == "i1");
  CHECK(parts[2].url == "i2");
  CHECK(parts[2].message_index == 2);
  CHECK_THROWS_AS(m3::text::FindMediaParts(Json::parse(
                      R"([{"role":"user","content":[{"type":"image_url","image_url":{}}]}])")),
                  m3::Error);
}

namespace {

// Runs Build and returns the error it throws (code and message).
std::pair<m3::ErrorCode, std::string> BuildError(const PromptBuilder& b, const PromptInput& in,
                                                 const std::vector<MediaExpansion>& media) {
  try {
    b.Build(in, media);
  } catch (const m3::Error& e) {
    return {e.code(), e.what()};
  }
  FAIL("Build did not throw");
  return {m3::ErrorCode::kInternal, ""};
}

}  // namespace

TEST_CASE("inconsistent media are errors that name the item") {
  PromptBuilder b = M2Builder();
  PromptInput in;
  in.messages = UserWithMedia();

  // Wrong number of expansions.
  auto [code1, msg1] = BuildError(b, in, {Image(2)});
  CHECK(code1 == m3::ErrorCode::kInvalidArgument);
  CHECK(msg1.find("2 media parts") != std::string::npos);

  // Wrong kind.
  auto [code2, msg2] = BuildError(b, in, {Video(1, 2), Video(1, 2)});
  CHECK(code2 == m3::ErrorCode::kInvalidArgument);
  CHECK(msg2.find("media item 0 (image in message 0, part 1)") != std::string::npos);

  // Expansion disagreeing with its own count.
  MediaExpansion bad = Video(2, 4);
  bad.num_placeholders = 7;
  auto [code3, msg3] = BuildError(b, in, {Image(3), bad});
  CHECK(code3 == m3::ErrorCode::kUnprocessable);
  CHECK(msg3.find("media item 1 (video in message 0, part 3)") != std::string::npos);

  // Placeholder tokens smuggled into the user's text.
  PromptInput sneaky;
  sneaky.messages = Json::parse(R"([{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": "u"}},
    {"type": "text", "text": "look ]<]image[>[ here"}]}])");
  auto [code4, msg4] = BuildError(b, sneaky, {Image(3)});
  CHECK(code4 == m3::ErrorCode::kInvalidArgument);
  CHECK(msg4.find("]<]image[>[") != std::string::npos);
  sneaky.messages[0]["content"][1]["text"] = "]<]video[>[";
  CHECK(BuildError(b, sneaky, {Image(3)}).first == m3::ErrorCode::kInvalidArgument);
  sneaky.messages[0]["content"] = Json::parse(
      R"([{"type":"text","text":"]<]image[>["},{"type":"image_url","image_url":{"url":"u"}}])");
  CHECK(BuildError(b, sneaky, {Image(3)}).first != m3::ErrorCode::kInternal);
}

TEST_CASE("a template that drops the media is an error, one that renders parts works") {
  PromptInput in;
  in.messages = UserWithMedia();
  PromptBuilder drops(
      m3::tmpl::ChatTemplate::Parse("{% for m in messages %}{{ m.role }}{% endfor %}"), Tok());
  auto [code, msg] = BuildError(drops, in, {Image(2), Video(1, 2)});
  CHECK(code == m3::ErrorCode::kUnprocessable);
  CHECK(msg.find("media item 0") != std::string::npos);

  // A template that walks the parts itself (as VL templates do) and wraps each in a line.
  PromptBuilder parts(m3::tmpl::ChatTemplate::Parse(
                          "{% for m in messages %}{% for p in m.content %}[{{ p.text if p.type == "
                          "'text' else '' }}]\n{% endfor %}{% endfor %}"),
                      Tok());
  std::vector<MediaExpansion> media = {Image(2), Video(1, 3)};
  AssembledPrompt p = parts.Build(in, media);
  CHECK(p.text == "[Describe ]\n[" + media[0].text + "]\n[ and ]\n[" + media[1].text + "]\n");
  CheckImageSpan(p, 0, 2);
  CHECK(p.media[1].num_placeholders == 3);
}

TEST_CASE("text-only requests need no media, and may not hold placeholder tokens") {
  PromptInput sneaky;
  sneaky.messages = Json::parse(R"([{"role": "user", "content": "a ]<]video[>[ b"}])");
  CHECK_THROWS_AS(M2Builder().Build(sneaky, {}), m3::Error);

  PromptInput in;
  in.messages = Json::parse(R"([{"role": "user", "content": "Hi <think> there"}])");
  in.add_generation_prompt = false;
  AssembledPrompt p = M2Builder().Build(in, {});
  CHECK(p.text ==
        "]~!b[]~b]system\nYou are a helpful assistant.[e~[\n]~b]user\nHi <think> there[e~[\n");
  CHECK(p.media.empty());
  CHECK(p.ids == Tok().Encode(p.text));
}

TEST_CASE("text-only templates get list content joined into a string") {
  using m3::text::ContentFormat;
  using m3::text::DetectContentFormat;
  auto read = [](const char* name) {
    return m3::test::ReadFile(m3::test::DataPath(std::string("chat_templates/") + name));
  };
  CHECK(DetectContentFormat(read("MiniMax-M2.jinja")) == ContentFormat::kParts);
  CHECK(DetectContentFormat(read("Mistral-Small-3.1-24B-Instruct-2503.jinja")) ==
        ContentFormat::kParts);
  for (const char* name : {"Qwen3-0.6B.jinja", "Llama-3.2-3B-Instruct.jinja", "DeepSeek-V3.1.jinja",
                           "Hermes-3-Llama-3.1-8B-tool_use.jinja"}) {
    CHECK(DetectContentFormat(read(name)) == ContentFormat::kString);
  }

  const std::string source = read("Qwen3-0.6B.jinja");
  PromptBuilder b(m3::tmpl::ChatTemplate::Parse(source, "Qwen3-0.6B.jinja"), Tok(), {},
                  DetectContentFormat(source));
  PromptInput in;
  in.messages = UserWithMedia();
  std::vector<MediaExpansion> media = {Image(2), Video(2, 2)};
  AssembledPrompt p = b.Build(in, media);
  // Python jinja2 renders content "Describe \nIMG\n and \nVID" to:
  CHECK(p.text == "<|im_start|>user\nDescribe \n" + media[0].text + "\n and \n" + media[1].text +
                      "<|im_end|>\n<|im_start|>assistant\n");
  CheckImageSpan(p, 0, 2);
  CHECK(p.media[1].runs.size() == 2);
}
