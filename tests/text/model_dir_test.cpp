// What the gateway takes from a model directory besides the processor: tokenizer_config.json's
// special tokens (string and AddedToken forms, transformers 4 and 5) and added tokens merged
// into tokenizer.json, the chat template's lookup order, and the template variables a
// PromptBuilder made from the directory passes.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/template/chat_template.h"
#include "gateway/text/prompt_builder.h"
#include "gateway/tokenizer/tokenizer_config.h"
#include "shared/error.h"
#include "tests/test_util.h"

using Json = nlohmann::ordered_json;

namespace {

const std::string kModel = m3::test::DataPath("chat-e2e/model");

// A model directory with chat-e2e's tokenizer.json and the given other files.
std::string ModelDir(const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string dir = m3::test::TempDir();
  m3::test::WriteFile(dir + "/tokenizer.json", m3::test::ReadFile(kModel + "/tokenizer.json"));
  for (const auto& [name, text] : files) m3::test::WriteFile(dir + "/" + name, text);
  return dir;
}

std::string ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const m3::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("tokenizer_config.json: special tokens in string and AddedToken forms") {
  const auto v4 = m3::tok::ParseTokenizerConfig(R"({
    "bos_token": {"__type": "AddedToken", "content": "]~!b[", "lstrip": false},
    "eos_token": "[e~[", "unk_token": null,
    "additional_special_tokens": ["<think>", {"content": "</think>"}],
    "added_tokens_decoder": {
      "32001": {"content": "<b>", "special": false, "lstrip": true},
      "32000": {"content": "<a>", "special": true}}})",
                                                "v4.json");
  CHECK(v4.bos_token == "]~!b[");
  CHECK(v4.eos_token == "[e~[");
  CHECK_FALSE(v4.unk_token);
  CHECK_FALSE(v4.pad_token);
  CHECK(v4.additional_special_tokens == std::vector<std::string>{"<think>", "</think>"});
  REQUIRE(v4.added_tokens.size() == 2);
  CHECK(v4.added_tokens[0]["id"] == 32000);  // in id order
  CHECK(v4.added_tokens[0]["special"] == true);
  CHECK(v4.added_tokens[1]["lstrip"] == true);

  // transformers 5: extra_special_tokens may name its tokens.
  const auto v5 = m3::tok::ParseTokenizerConfig(
      R"({"eos_token": "[e~[", "extra_special_tokens": {"image_token": "]<]image[>["}})", "v5");
  CHECK(v5.additional_special_tokens == std::vector<std::string>{"]<]image[>["});

  for (const char* bad : {R"({"bos_token": 3})", R"({"added_tokens_decoder": {"x": {}}})",
                          R"({"added_tokens_decoder": {"5": {"content": 5}}})",
                          R"({"added_tokens_decoder": {"-1": {"content": "a"}}})",
                          R"({"extra_special_tokens": "a"})", "[1]", "{"}) {
    CAPTURE(bad);
    const std::string message =
        ErrorOf([&] { m3::tok::ParseTokenizerConfig(bad, "dir/tokenizer_config.json"); });
    CHECK(message.find("dir/tokenizer_config.json") == 0);
  }
}

TEST_CASE("special tokens resolve to ids; a token the vocabulary lacks is an error") {
  const auto config = m3::tok::LoadTokenizerConfig(kModel);
  const auto tok = m3::tok::LoadModelTokenizer(kModel, config);
  const auto special = m3::tok::ResolveSpecialTokens(config, tok);
  CHECK(special.eos->id == 2);
  CHECK(special.TemplateVariables() ==
        Json({{"bos_token", "]~!b["}, {"eos_token", "[e~["}, {"pad_token", "]!p~["}}));

  const std::string dir = ModelDir({{"tokenizer_config.json", R"({"bos_token": "<s>"})"}});
  const auto bad = m3::tok::LoadTokenizerConfig(dir);
  const std::string message =
      ErrorOf([&] { m3::tok::ResolveSpecialTokens(bad, m3::tok::LoadModelTokenizer(dir, bad)); });
  CHECK(message == dir +
                       "/tokenizer_config.json: bos_token '<s>' is not in the tokenizer's "
                       "vocabulary");
}

TEST_CASE("added_tokens_decoder entries that tokenizer.json lacks are added") {
  const std::string dir = ModelDir({{"tokenizer_config.json", R"({"added_tokens_decoder": {
      "3": {"content": "]~!b[", "special": true},
      "32000": {"content": "<|extra|>", "special": true}}})"}});
  const auto config = m3::tok::LoadTokenizerConfig(dir);
  const auto tok = m3::tok::LoadModelTokenizer(dir, config);
  REQUIRE(tok.TokenToId("<|extra|>"));
  CHECK(*tok.TokenToId("<|extra|>") == 32000);
  CHECK(tok.IsSpecial(32000));
  CHECK(tok.VocabSize() == 32001);
  const auto ids = tok.Encode("a<|extra|>b");
  REQUIRE(ids.size() == 3);
  CHECK(ids[1] == 32000);
  CHECK(tok.Decode(ids, /*skip_special_tokens=*/true) == "ab");

  // An id or a content that tokenizer.json already gives to something else.
  for (const char* conflict : {R"({"added_tokens_decoder": {"3": {"content": "<other>"}}})",
                               R"({"added_tokens_decoder": {"40000": {"content": "]~!b["}}})",
                               R"({"added_tokens_decoder": {"40000": {"content": "the"}}})"}) {
    CAPTURE(conflict);
    const std::string d = ModelDir({{"tokenizer_config.json", conflict}});
    const auto c = m3::tok::LoadTokenizerConfig(d);
    const std::string message = ErrorOf([&] { m3::tok::LoadModelTokenizer(d, c); });
    CHECK(message.find(d + "/tokenizer_config.json: added_tokens_decoder id") == 0);
    CHECK(message.find("conflicts with " + d + "/tokenizer.json") != std::string::npos);
  }
  const std::string none = m3::test::TempDir();
  CHECK(ErrorOf([&] { m3::tok::LoadModelTokenizer(none, {}); }).find("has no tokenizer.json") !=
        std::string::npos);
}

TEST_CASE("chat template lookup: .jinja, then chat_template.json, then tokenizer_config.json") {
  const std::string dir =
      ModelDir({{"tokenizer_config.json", R"({"chat_template": "from tokenizer_config"})"},
                {"chat_template.json", R"({"chat_template": "from chat_template.json"})"}});
  CHECK(m3::tmpl::LoadChatTemplateSource(dir) == "from chat_template.json");
  m3::test::WriteFile(dir + "/chat_template.jinja", "from jinja");
  CHECK(m3::tmpl::LoadChatTemplateSource(dir) == "from jinja");
  const std::string only_config =
      ModelDir({{"tokenizer_config.json", R"({"chat_template": "from tokenizer_config"})"}});
  CHECK(m3::tmpl::LoadChatTemplateSource(only_config) == "from tokenizer_config");
  const std::string bad = ModelDir({{"chat_template.json", R"({"chat_template": 5})"}});
  CHECK(ErrorOf([&] { m3::tmpl::LoadChatTemplateSource(bad); }).find("must be a string") !=
        std::string::npos);
  CHECK(ErrorOf([&] {
          m3::tmpl::LoadChatTemplateSource(ModelDir({}));
        }).find("no chat_template.jinja") != std::string::npos);
}

TEST_CASE("a PromptBuilder from a directory passes the special tokens; a request overrides") {
  const std::string dir = ModelDir(
      {{"tokenizer_config.json", R"({"bos_token": "]~!b[", "eos_token": "[e~["})"},
       {"chat_template.jinja", "{{ bos_token }}|{{ eos_token }}|{{ messages[0].content }}"}});
  const auto builder = m3::text::PromptBuilder::FromModelDir(dir);
  CHECK(builder.options().media_rendering == m3::text::MediaRendering::kSentinel);
  m3::text::PromptInput input;
  input.messages = Json::parse(R"([{"role": "user", "content": "hi"}])");
  CHECK(builder.Build(input, {}).rendered == "]~!b[|[e~[|hi");
  input.extra_context = {{"eos_token", "END"}};
  const auto got = builder.Build(input, {});
  CHECK(got.rendered == "]~!b[|END|hi");
  CHECK(got.ids.front() == 3);
}
