// The gateway's chat path end to end, without HTTP: an OpenAI request body is parsed, its
// prompt assembled (PromptBuilder) with the images preprocessed (MediaPreprocessor), sent to a
// real `m3-engine serve` by a GenerationSession, and the tokens streamed back are turned into
// the chat.completion body and the SSE sequence by the API's GenerationResponder. For every
// chat-e2e case (random weights, greedy) the prompt is the reference's ids and usage counts it
// (vision placeholders included); for the text and one-image conversations, reasoning +
// content equal the reference's completion_text (the cases the CPU engine reproduces greedily;
// see tests/e2e/cli_stack_test.cpp), and for the others streamed equals non-streamed.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include <nlohmann/json.hpp>

#include "gateway/api/generation_responder.h"
#include "gateway/engine_client/engine_request.h"
#include "gateway/engine_client/engine_router.h"
#include "gateway/engine_client/generation_session.h"
#include "gateway/media/media_preprocessor.h"
#include "gateway/openai/chat_request.h"
#include "gateway/openai/output_options.h"
#include "gateway/openai/request_body.h"
#include "gateway/openai/response_formatter.h"
#include "gateway/template/chat_template.h"
#include "gateway/text/chat_format.h"
#include "gateway/text/prompt_builder.h"
#include "shared/model_config_view.h"
#include "tests/engine_server/server_process.h"
#include "tests/test_util.h"

using namespace m3;
using namespace std::chrono_literals;
using Json = nlohmann::ordered_json;

namespace {

const std::string kDir = test::DataPath("chat-e2e");
const std::string kModel = kDir + "/model";

struct Output {
  std::string content, reasoning;
  Json usage;
  std::string finish_reason;
};

// What the HTTP handler will do for one request, streamed or not.
class Pipeline {
 public:
  explicit Pipeline(engine_client::EngineRouter& router)
      : router_(router),
        builder_(text::PromptBuilder::FromModelDir(kModel)),
        pre_(media::LoadVisionProcessor(kModel), {}),
        eos_(LoadModelConfigView(kModel).eos_token_ids()),
        format_(text::DetectChatFormat(tmpl::LoadChatTemplateSource(kModel))) {
    model_.name = "chat-e2e";
    model_.generation = LoadGenerationConfig(kModel);
    model_.max_model_len = router_.endpoints()[0]->model_info()->max_model_len();
  }

  // Returns the response body (non-streaming) or the SSE text (streaming).
  std::string Run(const std::string& body, std::vector<int32_t>* prompt_ids) {
    const openai::ChatRequest req =
        openai::ParseChatRequest(openai::ParseRequestBody(body, {}), model_, {});
    std::vector<media::PreprocessedMedia> items;
    std::vector<text::MediaExpansion> expansions;
    for (const content::MediaRef& ref : req.media) {
      // Fetching is the HTTP layer's (media_fetcher); the cases name files beside them.
      const std::string bytes = test::ReadFile(kDir + "/" + ref.url);
      items.push_back(pre_.ProcessImage(bytes, {}));
      expansions.push_back({ref.kind, items.back().prompt_expansion,
                            static_cast<size_t>(items.back().placeholder_tokens)});
    }
    const text::AssembledPrompt prompt = builder_.Build(req.ToPromptInput(), expansions);
    *prompt_ids = prompt.ids;
    std::vector<engine_client::EngineMedia> media;
    for (const auto& item : items) {
      media.push_back({item.kind == content::MediaKind::kVideo, &item.pixel_values, item.grid_thw,
                       item.placeholder_tokens});
    }
    auto engine = router_.Pick();
    const auto request = engine_client::BuildGenerateRequest(
        "req-" + std::to_string(next_id_++), prompt.ids, media, req.sampling,
        openai::ResolveMaxTokens(req.sampling, prompt.ids.size(), model_.max_model_len),
        engine->model_info()->preferred_pixel_dtype());

    // The production path from here: the session on the engines, answered by the API's
    // responder through the response formatter.
    engine_client::GenerationRequest session_request;
    session_request.request = request;
    auto formatter =
        openai::MakeChatFormatter(builder_.tokenizer(), {"chatcmpl-1", 1700000000, model_.name},
                                  openai::ChatOutputOptions(req, eos_, prompt.rendered, format_),
                                  req.stream.stream, req.stream.include_usage, false);
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int status = 0;
    std::string out;
    engine_client::GenerationSession::Start(
        router_, std::move(session_request),
        api::MakeGenerationResponder(std::move(formatter), {[&](std::string events) {
                                                              std::lock_guard<std::mutex> lock(mu);
                                                              out += events;
                                                            },
                                                            [&](int http_status, std::string body) {
                                                              std::lock_guard<std::mutex> lock(mu);
                                                              status = http_status;
                                                              out += body;
                                                              done = true;
                                                              cv.notify_all();
                                                            }}));
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 60s, [&] { return done; }));
    REQUIRE_MESSAGE(status == 200, out);
    return out;
  }

 private:
  engine_client::EngineRouter& router_;
  text::PromptBuilder builder_;
  media::MediaPreprocessor pre_;
  std::vector<int64_t> eos_;
  text::ChatFormat format_;  // as `serve` detects it from the template
  openai::ServedModel model_;
  std::atomic<int> next_id_{0};
};

Output ReadSse(const std::string& sse) {
  Output out;
  size_t at = 0;
  bool saw_done = false;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    REQUIRE(end != std::string::npos);
    const std::string event = sse.substr(at, end - at);
    at = end + 2;
    REQUIRE(event.rfind("data: ", 0) == 0);
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      saw_done = true;
      continue;
    }
    const Json chunk = Json::parse(data);
    if (chunk.contains("usage") && !chunk["usage"].is_null()) out.usage = chunk["usage"];
    for (const Json& choice : chunk["choices"]) {
      const Json& delta = choice["delta"];
      if (delta.contains("content")) out.content += delta["content"].get<std::string>();
      if (delta.contains("reasoning_content")) {
        out.reasoning += delta["reasoning_content"].get<std::string>();
      }
      if (!choice["finish_reason"].is_null()) out.finish_reason = choice["finish_reason"];
    }
  }
  CHECK(saw_done);
  return out;
}

}  // namespace

TEST_CASE("chat-e2e cases through parse -> prompt + media -> engine -> response builders") {
  test::ServerProcess server("chat-e2e/model");
  engine_client::EngineRouter router({"127.0.0.1:" + std::to_string(server.port())},
                                     engine_client::LoadExpectedModel(kModel, 0));
  REQUIRE(router.Start() == 1);
  Pipeline pipeline(router);

  const Json cases = Json::parse(test::ReadFile(kDir + "/chat_cases.json"));
  REQUIRE(cases.size() >= 2);
  int exact = 0;
  for (const Json& c : cases) {
    const std::string name = c["name"].get<std::string>();
    const bool reference = name == "text" || name == "image";
    std::string non_streamed_text;
    const size_t n = c["completion_ids"].size();
    const std::vector<int32_t> want_prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    for (bool stream : {false, true}) {
      CAPTURE(name);
      CAPTURE(stream);
      Json body = {{"model", "chat-e2e"},
                   {"messages", c["messages"]},
                   {"max_tokens", n},
                   {"temperature", 0},
                   {"stream", stream}};
      if (stream) body["stream_options"] = {{"include_usage", true}};
      std::vector<int32_t> prompt_ids;
      const std::string out = pipeline.Run(body.dump(), &prompt_ids);
      CHECK(prompt_ids == want_prompt);
      Output got;
      if (stream) {
        got = ReadSse(out);
      } else {
        const Json r = Json::parse(out);
        CHECK(r["object"] == "chat.completion");
        const Json& m = r["choices"][0]["message"];
        got.content = m["content"].is_null() ? "" : m["content"].get<std::string>();
        got.reasoning =
            m["reasoning_content"].is_null() ? "" : m["reasoning_content"].get<std::string>();
        got.usage = r["usage"];
        got.finish_reason = r["choices"][0]["finish_reason"];
      }
      if (reference) {
        CHECK(got.reasoning + got.content == c["completion_text"].get<std::string>());
        exact += 1;
      } else if (stream) {
        CHECK(got.reasoning + got.content == non_streamed_text);
      } else {
        non_streamed_text = got.reasoning + got.content;
      }
      CHECK(got.finish_reason == c["finish_reason"].get<std::string>());
      CHECK(got.usage["prompt_tokens"] == want_prompt.size());
      CHECK(got.usage["completion_tokens"] == n);
    }
  }
  CHECK(exact == 4);  // text and image, streamed and not
}
