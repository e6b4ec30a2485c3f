// The reference through the real processes: `m3-engine serve` and `m3-gateway serve` on
// loopback, requests over HTTP. For every chat-e2e case (random weights, greedy, max_tokens =
// the reference's completion length) the usage counts the reference prompt and reasoning +
// content equal its completion_text, streamed and not, with images sent as data: URIs and as
// http URLs from a local origin (allowlisted explicitly on the gateway). The demo model
// answers each of its sample pictures as the reference did (eval.json's "got").
#include <doctest/doctest.h>

#include <set>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::json;

struct Answer {
  int status = 0;
  std::string content, reasoning, finish_reason, raw;
  Json usage;
};

Answer Chat(uint16_t port, Json body, bool stream) {
  body["stream"] = stream;
  if (stream) body["stream_options"] = {{"include_usage", true}};
  const ApiReply r = PostJson(port, "/v1/chat/completions", body);
  Answer a;
  a.status = r.status;
  a.raw = r.body;
  if (r.status != 200) return a;
  if (stream) {
    CHECK(r.headers.at("content-type").rfind("text/event-stream", 0) == 0);
    const StreamSummary s = ReadSse(r.body);
    CHECK(s.well_formed);
    CHECK(s.done);
    CHECK(s.errors.empty());
    a.content = s.content;
    a.reasoning = s.reasoning;
    a.finish_reason = s.finish_reason;
    a.usage = s.usage;
  } else {
    const Json j = Json::parse(r.body);
    CHECK(j["object"] == "chat.completion");
    const Json& m = j["choices"][0]["message"];
    a.content = m["content"].is_string() ? m["content"].get<std::string>() : "";
    a.reasoning = m.contains("reasoning_content") && m["reasoning_content"].is_string()
                      ? m["reasoning_content"].get<std::string>()
                      : "";
    a.finish_reason = j["choices"][0]["finish_reason"].get<std::string>();
    a.usage = j["usage"];
  }
  return a;
}

std::string StripLeadingNewlines(std::string s) {
  s.erase(0, s.find_first_not_of('\n'));
  return s;
}

// Runs the named cases of chat_cases.json over HTTP, each with its images as data: URIs and as
// http URLs, streamed and not.
void CheckReferenceCases(const std::set<std::string>& names) {
  const std::string folder = DataPath("chat-e2e");
  ServerProcess engine("chat-e2e/model");
  LoopbackOrigin origin([&](const std::string& path) {
    ScriptedReply reply;
    reply.headers = {{"Content-Type", "image/png"}};
    reply.body = ReadFile(folder + path);  // path: /images/<name>
    return reply;
  });
  GatewayProcess gateway({"serve", "--model", folder + "/model", "--port", "0", "--engine",
                          engine.address(), "--served-model-name", "chat-e2e", "--allow-media-host",
                          "127.0.0.1:" + std::to_string(origin.port())});
  const Json cases = Json::parse(ReadFile(folder + "/chat_cases.json"));
  size_t checked = 0;
  for (const Json& c : cases) {
    const std::string name = c["name"].get<std::string>();
    if (!names.count(name)) continue;
    const size_t n = c["completion_ids"].size();
    for (const bool http_urls : {false, true}) {
      const Json messages = RewriteImages(c["messages"], [&](const std::string& rel, int) {
        return http_urls ? origin.Url("/" + rel) : DataUri(folder + "/" + rel, "image/png");
      });
      for (const bool stream : {false, true}) {
        CAPTURE(name);
        CAPTURE(http_urls);
        CAPTURE(stream);
        const Json body = {
            {"model", "chat-e2e"}, {"messages", messages}, {"max_tokens", n}, {"temperature", 0}};
        const Answer a = Chat(gateway.http_port(), body, stream);
        REQUIRE_MESSAGE(a.status == 200, a.raw);
        CHECK(a.usage["prompt_tokens"] == c["prompt_ids"].size());
        CHECK(a.usage["completion_tokens"] == n);
        CHECK(a.finish_reason == c["finish_reason"].get<std::string>());
        CHECK(a.reasoning + a.content == c["completion_text"].get<std::string>());
        ++checked;
      }
    }
  }
  CHECK(checked == 4 * names.size());
  if (names.count("image")) CHECK(origin.requests() > 0);
  CHECK(gateway.Terminate() == 0);  // SIGTERM: graceful, exit 0
}

TEST_CASE("chat-e2e reference over HTTP: every case, data URIs and http URLs") {
  CheckReferenceCases({"text", "image", "two_images", "multi_turn"});
}

TEST_CASE("demo model over HTTP: each sample picture gets the reference's answer") {
  ServerProcess engine("demo-model/model");
  GatewayProcess gateway({"serve", "--model", DataPath("demo-model/model"), "--port", "0",
                          "--engine", engine.address()});
  const Json eval = Json::parse(ReadFile(DataPath("demo-model/eval.json")));
  for (int i = 0; i < 8; ++i) {
    const Json& answer = eval["answers"][i];
    const std::string picture = DataPath("demo-model/samples/sample" + std::to_string(i) + ".png");
    const Json messages = RewriteImages(
        answer["question"], [&](const std::string&, int) { return DataUri(picture, "image/png"); });
    for (const bool stream : {false, true}) {
      CAPTURE(i);
      CAPTURE(stream);
      // The served name is the model directory's name.
      const Json body = {
          {"model", "model"}, {"messages", messages}, {"max_tokens", 24}, {"temperature", 0}};
      const Answer a = Chat(gateway.http_port(), body, stream);
      REQUIRE_MESSAGE(a.status == 200, a.raw);
      CHECK(a.reasoning.empty());
      CHECK(StripLeadingNewlines(a.content) ==
            StripLeadingNewlines(answer["got"].get<std::string>()));
    }
  }
}

}  // namespace
}  // namespace m3::test
