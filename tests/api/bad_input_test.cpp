// The bad-input catalog over HTTP against the real gateway and engine: each request gets its
// documented status and an OpenAI error body ({"error": {"message", "type", "param",
// "code"}}), and the server keeps answering good requests afterwards.
#include <doctest/doctest.h>

#include "tests/api/api_client.h"
#include "tests/api/api_stack.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::json;

const Headers kAuth = {{"Authorization", "Bearer test-key"}};

Json UserImage(const std::string& url, const std::string& kind = "image_url") {
  return Json::array({{{"role", "user"},
                       {"content",
                        {{{"type", kind}, {kind, {{"url", url}}}},
                         {{"type", "text"}, {"text", "What is this?"}}}}}});
}

Json Body(Json messages) {
  return {{"model", "chat-e2e"}, {"messages", std::move(messages)}, {"max_tokens", 2}};
}

void CheckError(const ApiReply& r, int status, const std::string& what) {
  CAPTURE(what);
  CAPTURE(r.body);
  CHECK(r.status == status);
  const Json j = Json::parse(r.body, nullptr, false);
  REQUIRE(j.is_object());
  REQUIRE(j.contains("error"));
  CHECK(j["error"]["message"].is_string());
  CHECK(!j["error"]["message"].get<std::string>().empty());
  CHECK(j["error"]["type"].is_string());
  CHECK(j["error"].contains("param"));
  CHECK(j["error"].contains("code"));
}

TEST_CASE("bad input over HTTP: right status, OpenAI error body, server stays up") {
  const std::string folder = DataPath("chat-e2e");
  ServerProcess engine("chat-e2e/model");
  LoopbackOrigin origin([&](const std::string& path) {
    ScriptedReply reply;
    if (path == "/text.png") {
      reply.headers = {{"Content-Type", "image/png"}};
      reply.body = "this is not an image at all, just some text bytes";
    } else if (path == "/corrupt.mp4") {
      reply.headers = {{"Content-Type", "video/mp4"}};
      reply.body = std::string(
                       "\0\0\0\x18"
                       "ftypmp42\0\0\0\0mp42isom",
                       24) +
                   std::string(4000, '\x5a');
    } else {
      reply.headers = {{"Content-Type", "image/png"}};
      reply.body = ReadFile(folder + "/images/red_square.png");
    }
    return reply;
  });
  const std::string allow = "127.0.0.1:" + std::to_string(origin.port());
  GatewayProcess gateway({"serve",
                          "--model",
                          folder + "/model",
                          "--port",
                          "0",
                          "--engine",
                          engine.address(),
                          "--served-model-name",
                          "chat-e2e",
                          "--api-key",
                          "test-key",
                          "--allow-media-host",
                          allow,
                          "--allow-media-host",
                          "127.0.0.1:1",
                          "--max-images-per-request",
                          "2",
                          "--max-body-bytes",
                          "1000000",
                          "--fetch-timeout-ms",
                          "3000"});
  const uint16_t port = gateway.http_port();
  auto post = [&](const std::string& body, const Headers& extra = {}) {
    Headers h = kAuth;
    h.insert(h.end(), extra.begin(), extra.end());
    h.emplace_back("Content-Type", "application/json");
    return ApiCall(port, "POST", "/v1/chat/completions", body, h);
  };
  const std::string good = Body(Json::array({{{"role", "user"}, {"content", "Hi"}}})).dump();

  CheckError(post("{\"model\": \"chat-e2e\", \"messages\": [", {}), 400, "malformed JSON");
  CheckError(post(R"({"model": "chat-e2e", "messages": 3})"), 400, "messages not a list");
  CheckError(post(R"({"model": "chat-e2e", "messages": [{"role": "user", "content": 5}]})"), 400,
             "content of a wrong type");
  CheckError(post(R"({"model": "chat-e2e", "messages": [{"role": "user", "content": "x"}],
                      "temperature": "hot"})"),
             400, "temperature of a wrong type");
  {
    Json b = Json::parse(good);
    b["model"] = "gpt-4o";
    const ApiReply r = post(b.dump());
    CheckError(r, 404, "unknown model");
    CHECK(Json::parse(r.body)["error"]["code"] == "model_not_found");
  }
  {
    Json b = Json::parse(good);
    b["n"] = 17;
    CheckError(post(b.dump()), 400, "n over the bound of 16");
    b = Json::parse(good);
    b["max_tokens"] = -1;
    CheckError(post(b.dump()), 400, "negative max_tokens");
  }
  CheckError(post(Body(UserImage("ftp://example.com/a.png")).dump()), 400, "bad URL scheme");
  CheckError(post(Body(UserImage("file:///etc/passwd")).dump()), 400, "file://");
  CheckError(post(Body(UserImage("http://10.1.2.3/a.png")).dump()), 400, "private address");
  CheckError(post(Body(UserImage("http://169.254.169.254/latest/meta-data")).dump()), 400,
             "link-local metadata address");
  {
    // The client's URL, not the server's failure: 400 naming the item and the cause.
    const ApiReply r = post(Body(UserImage("http://127.0.0.1:1/a.png")).dump());
    CheckError(r, 400, "unreachable host (allowlisted, nothing listens)");
    const Json e = Json::parse(r.body)["error"];
    CHECK(e["type"] == "invalid_request_error");
    CHECK(e["code"] == "media_fetch_failed");
    CHECK(e["param"] == "messages[0].content[0].image_url.url");
    const std::string message = e["message"].get<std::string>();
    CHECK(message.find("messages[0].content[0].image_url.url") != std::string::npos);
    CHECK(message.find("connecting") != std::string::npos);
    CHECK(message.find("127.0.0.1:1") != std::string::npos);
  }
  CheckError(post(Body(UserImage(origin.Url("/text.png"))).dump()), 415, "non-image bytes");
  CheckError(
      post(Body(UserImage("data:image/png;base64," + std::string("dGhpcyBpcyBub3QgYW4gaW1hZ2U=")))
               .dump()),
      415, "non-image bytes as a data: URI");
  {
    const ApiReply r = post(Body(UserImage(origin.Url("/corrupt.mp4"), "video_url")).dump());
    CAPTURE(r.body);
    CHECK((r.status == 400 || r.status == 415 || r.status == 422));
    CheckError(r, r.status, "corrupt video");
  }
  {
    Json messages = UserImage(origin.Url("/a.png"));
    for (int i = 0; i < 2; ++i) messages[0]["content"].push_back(messages[0]["content"][0]);
    CheckError(post(Body(messages).dump()), 413, "too many images");
  }
  {
    Json b = Json::parse(good);
    b["messages"][0]["content"] = std::string(1200000, 'a');
    CheckError(post(b.dump()), 413, "oversize body");
  }
  {
    const ApiReply r =
        ApiCall(port, "POST", "/v1/chat/completions", good, {{"Content-Type", "text/plain"}});
    CheckError(r, 401, "no API key");
    CHECK(r.headers.count("www-authenticate"));
    CheckError(ApiCall(port, "POST", "/v1/chat/completions", good,
                       {{"Authorization", "Bearer wrong"}, {"Content-Type", "application/json"}}),
               401, "wrong API key");
  }
  CheckError(ApiCall(port, "POST", "/v1/chat/completions", good,
                     {{"Authorization", "Bearer test-key"}, {"Content-Type", "text/plain"}}),
             415, "non-JSON content type");
  CheckError(ApiCall(port, "GET", "/v1/chat/completions", "", kAuth), 405, "wrong method");
  CheckError(ApiCall(port, "GET", "/v2/everything", "", kAuth), 404, "unknown route");
  CheckError(ApiCall(port, "GET", "/v1/models/gpt-4o", "", kAuth), 404, "unknown model by name");

  // Still serving: health, and a real completion.
  CHECK(ApiCall(port, "GET", "/health").status == 200);
  const ApiReply ok = post(good);
  CHECK_MESSAGE(ok.status == 200, ok.body);
  const ApiReply image = post(Body(UserImage(origin.Url("/a.png"))).dump());
  CHECK_MESSAGE(image.status == 200, image.body);
  CHECK(gateway.Terminate() == 0);
}

}  // namespace
}  // namespace m3::test
