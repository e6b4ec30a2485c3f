// The gateway's prompt path against the chat-e2e goldens (tests/data/chat-e2e, made by
// transformers 5.17's MiniMaxM3VLProcessor): everything comes from the model directory as
// transformers saves it (tokenizer.json + tokenizer_config.json, chat_template.jinja,
// processor_config.json), each image is preprocessed with the processor configured from it,
// and for every case the rendered prompt equals `prompt` and the ids equal `prompt_ids`.
#include <doctest/doctest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/media/media_preprocessor.h"
#include "gateway/media/vision_processor.h"
#include "gateway/text/prompt_builder.h"
#include "shared/error.h"
#include "tests/test_util.h"

using m3::content::MediaKind;
using m3::text::MediaExpansion;
using m3::text::PromptBuilder;
using Json = nlohmann::ordered_json;

namespace {

const std::string kDir = m3::test::DataPath("chat-e2e");
const std::string kModel = kDir + "/model";

Json Cases() {
  return Json::parse(m3::test::ReadFile(kDir + "/chat_cases.json"));
}

}  // namespace

TEST_CASE("the chat-e2e model directory configures tokenizer, template and processor") {
  const PromptBuilder builder = PromptBuilder::FromModelDir(kModel);
  CHECK(builder.options().media_rendering == m3::text::MediaRendering::kTemplate);
  CHECK(builder.options().content_format == m3::text::ContentFormat::kParts);
  const auto& special = builder.special_tokens();
  REQUIRE(special.bos);
  REQUIRE(special.eos);
  REQUIRE(special.pad);
  CHECK(special.bos->content == "]~!b[");
  CHECK(special.bos->id == 3);  // config.json's text_config.bos_token_id
  CHECK(special.eos->id == 2);
  CHECK(special.pad->id == 0);
  CHECK_FALSE(special.unk);  // "unk_token": null
  CHECK(builder.options().template_variables ==
        Json({{"bos_token", "]~!b["}, {"eos_token", "[e~["}, {"pad_token", "]!p~["}}));

  // processor_config.json: size.longest_edge / shortest_edge are the image max/min pixels;
  // the video section's own keys, do_sample_frames false included.
  const auto processor = m3::media::LoadVisionProcessor(kModel);
  const m3::media::MediaOptions defaults;
  const auto big = processor->ImageResize(1000, 1000, defaults);
  CHECK(big.height * big.width <= 50176);
  CHECK(big.height == 224);
  const auto small = processor->ImageResize(10, 10, defaults);
  CHECK(small.height * small.width >= 3136);
  CHECK(processor->VideoSampling(defaults).all_frames);
  m3::media::MediaOptions fps;
  fps.fps = 2.0;
  CHECK_FALSE(processor->VideoSampling(fps).all_frames);
  CHECK(processor->VideoSampling(fps).max_frames == 768);
  CHECK(processor->VideoSampling(fps).min_frames == 4);
  CHECK(processor->VideoResize(1000, 1000, 1, defaults).height == 756);  // max_pixels 602112
}

TEST_CASE("every chat-e2e case: rendered prompt and prompt ids equal the reference's") {
  const PromptBuilder builder = PromptBuilder::FromModelDir(kModel);
  const m3::media::MediaPreprocessor pre(m3::media::LoadVisionProcessor(kModel), {});
  const Json cases = Cases();
  REQUIRE(cases.size() >= 4);
  size_t images_seen = 0;
  for (const Json& c : cases) {
    const std::string name = c["name"].get<std::string>();
    CAPTURE(name);
    m3::text::PromptInput input;
    input.messages = c["messages"];
    std::vector<MediaExpansion> media;
    for (const auto& part : m3::text::FindMediaParts(input.messages)) {
      REQUIRE(part.kind == MediaKind::kImage);
      const auto item = pre.ProcessImage(m3::test::ReadFile(kDir + "/" + part.url), {});
      media.push_back(
          {MediaKind::kImage, item.prompt_expansion, static_cast<size_t>(item.placeholder_tokens)});
      ++images_seen;
    }
    const m3::text::AssembledPrompt got = builder.Build(input, media);
    CHECK(got.rendered == c["prompt"].get<std::string>());
    const auto want = c["prompt_ids"].get<std::vector<int32_t>>();
    CHECK(got.ids == want);
    REQUIRE(got.media.size() == media.size());
    for (size_t i = 0; i < media.size(); ++i) {
      CHECK(got.media[i].num_placeholders == media[i].num_placeholders);
    }
  }
  CHECK(images_seen == 4);
}

TEST_CASE("a template that writes placeholder tokens: request text may not forge them") {
  const PromptBuilder builder = PromptBuilder::FromModelDir(kModel);
  const MediaExpansion one{MediaKind::kImage,
                           "]<]start of image[>[]<]image[>[]<]image[>[]<]end of image[>[", 2};
  auto error_of = [&](const Json& messages, std::vector<MediaExpansion> media) {
    m3::text::PromptInput input;
    input.messages = messages;
    try {
      builder.Build(input, media);
    } catch (const m3::Error& e) {
      return std::pair{e.code(), std::string(e.what())};
    }
    return std::pair{m3::ErrorCode::kInternal, std::string("no error")};
  };
  // A forged placeholder in user text, with and without a real image.
  auto [code, message] =
      error_of(Json::parse(R"([{"role": "user", "content": "look: ]<]image[>[ here"}])"), {});
  CHECK(code == m3::ErrorCode::kInvalidArgument);
  CHECK(message.find("must not contain") != std::string::npos);
  std::tie(code, message) = error_of(Json::parse(R"([{"role": "user", "content": [
      {"type": "image_url", "image_url": {"url": "a.png"}},
      {"type": "text", "text": "and ]<]image[>["}]}])"),
                                     {one});
  CHECK(code == m3::ErrorCode::kInvalidArgument);
  // Half a placeholder that the template's next token would complete.
  std::tie(code, message) =
      error_of(Json::parse(R"([{"role": "user", "content": "text ]<]image[>"}])"), {});
  CHECK(code == m3::ErrorCode::kInvalidArgument);
  CHECK(message.find("more image placeholder tokens") != std::string::npos);
  // A media count that does not match the messages.
  std::tie(code, message) =
      error_of(Json::parse(R"([{"role": "user", "content": "no media"}])"), {one});
  CHECK(code == m3::ErrorCode::kInvalidArgument);
}
