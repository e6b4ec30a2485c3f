// n > 1 and logit_bias through the real processes (`m3-engine serve` + `m3-gateway serve` on the
// demo model, CPU): n = 3 returns three choices with indices 0..2, whole and streamed, chat and
// text completions, usage counting the prompt once and summing the completions; seeded choices
// differ from each other and repeat run to run; choices 1..2 reuse choice 0's prompt pages
// (the engine's prefix-cache hit counter grows by their prompt pages); n over the bound and
// best_of != n are 400; a token banned with logit_bias -100 never appears, and an unknown id
// is a 400 naming it.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <set>

#include <grpcpp/grpcpp.h>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::json;

int64_t PrefixHits(const ServerProcess& engine) {
  auto stub = engine.Stub();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  engine::v1::HealthResponse health;
  if (!stub->Health(&context, engine::v1::HealthRequest(), &health).ok()) return -1;
  return health.prefix_cache_hit_tokens();
}

Json ChatBody(int n, bool stream) {
  Json b = {
      {"model", "demo"},
      {"messages", {{{"role", "user"}, {"content", "Describe a red square and a blue circle."}}}},
      {"max_tokens", 12},
      {"temperature", 1.0},
      {"seed", 7},
      {"n", n},
      {"stream", stream}};
  if (stream) b["stream_options"] = {{"include_usage", true}};
  return b;
}

// Per choice index: content (chat) or text (completions) and finish reason, from a whole body
// or a stream.
struct Choices {
  std::map<int, std::string> text;
  std::map<int, std::string> finish;
  Json usage;
  bool done = false;
};

Choices Read(const ApiReply& r, bool stream) {
  Choices c;
  if (!stream) {
    const Json j = Json::parse(r.body);
    for (const Json& ch : j["choices"]) {
      const int i = ch["index"].get<int>();
      c.text[i] = ch.contains("message") ? ch["message"]["content"].get<std::string>()
                                         : ch["text"].get<std::string>();
      c.finish[i] = ch["finish_reason"].get<std::string>();
    }
    c.usage = j["usage"];
    c.done = true;
    return c;
  }
  size_t pos = 0;
  while ((pos = r.body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r.body.find("\n\n", pos);
    const std::string data = r.body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      c.done = true;
      continue;
    }
    const Json j = Json::parse(data);
    if (j.contains("usage") && !j["usage"].is_null()) c.usage = j["usage"];
    for (const Json& ch : j["choices"]) {
      const int i = ch["index"].get<int>();
      if (ch.contains("delta") && ch["delta"].contains("content") &&
          ch["delta"]["content"].is_string())
        c.text[i] += ch["delta"]["content"].get<std::string>();
      if (ch.contains("text")) c.text[i] += ch["text"].get<std::string>();
      if (ch.contains("finish_reason") && ch["finish_reason"].is_string())
        c.finish[i] = ch["finish_reason"].get<std::string>();
    }
  }
  return c;
}

TEST_CASE("n = 3: three choices, whole and streamed, chat and completions; prefix pages shared") {
  ServerProcess engine("demo-model/model");
  GatewayProcess gateway({"serve", "--model", DataPath("demo-model/model"), "--port", "0",
                          "--engine", engine.address(), "--served-model-name", "demo"});
  const uint16_t port = gateway.http_port();
  std::map<bool, Choices> chat;
  for (const bool stream : {false, true}) {
    CAPTURE(stream);
    const int64_t hits_before = PrefixHits(engine);
    const ApiReply r = PostJson(port, "/v1/chat/completions", ChatBody(3, stream));
    REQUIRE_MESSAGE(r.status == 200, r.body);
    const Choices c = Read(r, stream);
    CHECK(c.done);
    REQUIRE(c.text.size() == 3);
    REQUIRE(c.finish.size() == 3);
    for (int i = 0; i < 3; ++i) CHECK(c.text.count(i) == 1);
    const int64_t prompt = c.usage["prompt_tokens"].get<int64_t>();
    CHECK(prompt > 0);
    CHECK(c.usage["completion_tokens"].get<int64_t>() <= 3 * 12);
    CHECK(c.usage["completion_tokens"].get<int64_t>() >= 3);
    CHECK(c.usage["total_tokens"].get<int64_t>() ==
          prompt + c.usage["completion_tokens"].get<int64_t>());
    // Choices 1 and 2 start after choice 0's first token: its prompt pages are cached by then.
    const int64_t hits = PrefixHits(engine) - hits_before;
    MESSAGE("prefix-cache hit tokens for n = 3: " << hits << " (prompt " << prompt << ")");
    CHECK(hits >= 2 * (prompt / 32) * 16);  // at least the whole pages of half the prompt each
    chat[stream] = c;
  }
  // Seeded: choice i runs with seed + i, the same streamed or not; the choices differ.
  CHECK(chat[false].text == chat[true].text);
  std::set<std::string> distinct;
  for (auto& [i, t] : chat[false].text) distinct.insert(t);
  CHECK(distinct.size() >= 2);

  for (const bool stream : {false, true}) {
    CAPTURE(stream);
    Json b = {{"model", "demo"}, {"prompt", "The shape is"}, {"max_tokens", 6},
              {"n", 3},          {"temperature", 1.0},       {"stream", stream}};
    const ApiReply r = PostJson(port, "/v1/completions", b);
    REQUIRE_MESSAGE(r.status == 200, r.body);
    const Choices c = Read(r, stream);
    CHECK(c.text.size() == 3);
    CHECK(c.finish.size() == 3);
  }

  ApiReply r = PostJson(port, "/v1/chat/completions", ChatBody(17, false));
  CHECK(r.status == 400);
  CHECK(r.body.find("'n' = 17") != std::string::npos);
  Json b = ChatBody(2, false);
  b["best_of"] = 3;
  r = PostJson(port, "/v1/chat/completions", b);
  CHECK(r.status == 400);
  CHECK(r.body.find("best_of") != std::string::npos);
  CHECK(gateway.Terminate() == 0);
}

TEST_CASE("logit_bias: banned tokens never appear; unknown ids are 400") {
  ServerProcess engine("demo-model/model");
  GatewayProcess gateway({"serve", "--model", DataPath("demo-model/model"), "--port", "0",
                          "--engine", engine.address(), "--served-model-name", "demo"});
  const uint16_t port = gateway.http_port();
  Json body = {{"model", "demo"},
               {"prompt", "The shape is red. The shape is"},
               {"max_tokens", 24},
               {"ignore_eos", true}};
  const ApiReply plain = PostJson(port, "/v1/completions", body);
  REQUIRE_MESSAGE(plain.status == 200, plain.body);
  const std::string plain_text = Json::parse(plain.body)["choices"][0]["text"];
  // Ban every vocabulary token whose text holds the unbiased answer's most frequent character
  // (ASCII, not a space): it cannot reach the text, whatever tokens the model picks instead.
  std::map<char, int> freq;
  for (char ch : plain_text)
    if (ch > ' ' && ch < 127) ++freq[ch];
  REQUIRE(!freq.empty());
  char c = freq.begin()->first;
  for (auto [ch, k] : freq)
    if (k > freq[c]) c = ch;
  CAPTURE(c);
  const Json tok = Json::parse(ReadFile(DataPath("demo-model/model/tokenizer.json")));
  Json bias = Json::object();
  for (auto& [text, id] : tok["model"]["vocab"].items())
    if (text.find(c) != std::string::npos) bias[std::to_string(id.get<int>())] = -100;
  REQUIRE(bias.size() >= 1);
  body["logit_bias"] = bias;
  for (const double temperature : {0.0, 1.0}) {
    for (const bool stream : {false, true}) {
      CAPTURE(temperature);
      CAPTURE(stream);
      body["temperature"] = temperature;
      body["seed"] = 3;
      body["stream"] = stream;
      const ApiReply r = PostJson(port, "/v1/completions", body);
      REQUIRE_MESSAGE(r.status == 200, r.body);
      const std::string text = stream
                                   ? ReadSse(r.body).text
                                   : Json::parse(r.body)["choices"][0]["text"].get<std::string>();
      CHECK(!text.empty());
      CHECK_MESSAGE(text.find(c) == std::string::npos, text);
    }
  }
  // Chat takes it too.
  Json chat = {{"model", "demo"},
               {"messages", {{{"role", "user"}, {"content", "What colour is the shape?"}}}},
               {"max_tokens", 16},
               {"temperature", 0},
               {"logit_bias", bias}};
  ApiReply r = PostJson(port, "/v1/chat/completions", chat);
  REQUIRE_MESSAGE(r.status == 200, r.body);
  const Json m = Json::parse(r.body)["choices"][0]["message"];
  CHECK((m["content"].is_null() || m["content"].get<std::string>().find(c) == std::string::npos));
  r = PostJson(
      port, "/v1/completions",
      {{"model", "demo"}, {"prompt", "x"}, {"max_tokens", 2}, {"logit_bias", {{"439", 5}}}});
  CHECK(r.status == 400);
  CHECK(r.body.find("logit_bias.439") != std::string::npos);
  CHECK(gateway.Terminate() == 0);
}

}  // namespace
}  // namespace m3::test
