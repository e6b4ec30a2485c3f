// End to end: a real `m3-gateway serve --preprocess-only` process on a loopback port, fed
// data: URIs and URLs of a loopback origin. Answers must equal what the media library
// computes directly (and the reference goldens within tolerance); bad input must get the
// right status and an OpenAI-style error body; a full queue must answer 429.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "gateway/media/media_preprocessor.h"
#include "gateway/net/base64.h"
#include "gateway/preprocess/preprocess_service.h"
#include "shared/safetensors.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

using m3::test::GatewayProcess;
using m3::test::HttpCall;
using m3::test::LoopbackOrigin;
using m3::test::ScriptedReply;
using nlohmann::json;

namespace {

const char* kModel = "tests/data/m3-tiny/model";

std::string Image(const std::string& name) {
  return m3::test::ReadFile(m3::test::DataPath("m3-tiny/images/" + name));
}
std::string Video() {
  return m3::test::ReadFile(m3::test::DataPath("m3-tiny/video_ffv1.mkv"));
}
std::string DataUri(const std::string& type, const std::string& bytes) {
  return "data:" + type + ";base64," + m3::net::Base64Encode(bytes);
}
json ImagePart(const std::string& url) {
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}
json VideoPart(const std::string& url) {
  return {{"type", "video_url"}, {"video_url", {{"url", url}}}};
}

const m3::media::MediaPreprocessor& Direct() {
  static m3::media::MediaPreprocessor p(m3::media::LoadVisionProcessor(kModel), {});
  return p;
}

// The answer the service must give, computed in-process with the media library.
std::string Expected(const std::vector<std::pair<bool, std::string>>& items,
                     const m3::media::MediaOptions& options) {
  std::vector<m3::media::PreprocessedMedia> out;
  for (const auto& [is_image, bytes] : items) {
    out.push_back(is_image ? Direct().ProcessImage(bytes, options)
                           : Direct().ProcessVideo(bytes, options));
  }
  return m3::preprocess::EncodeSafetensors(m3::preprocess::GatherResults(std::move(out)));
}

void CheckSameTensors(const std::string& got_bytes, const std::string& want_bytes) {
  auto got = m3::SafetensorsFile::FromBytes(got_bytes, "reply");
  auto want = m3::SafetensorsFile::FromBytes(want_bytes, "expected");
  CHECK(got.Names() == want.Names());
  for (const auto& name : want.Names()) {
    CAPTURE(name);
    auto a = got.Get(name), b = want.Get(name);
    CHECK(a.dtype == b.dtype);
    CHECK(a.shape == b.shape);
    REQUIRE(a.nbytes == b.nbytes);
    CHECK(std::memcmp(a.data, b.data, a.nbytes) == 0);
  }
  CHECK(json::parse(got.metadata().at("items")) == json::parse(want.metadata().at("items")));
}

json ErrorOf(const m3::test::HttpReply& r) {
  json body = json::parse(r.body, nullptr, false);
  REQUIRE_MESSAGE(body.is_object(), r.body);
  REQUIRE(body.contains("error"));
  const json& e = body["error"];
  CHECK(e["message"].is_string());
  CHECK(e["type"].is_string());
  CHECK(e.contains("param"));
  CHECK(e["code"].is_string());
  return e;
}

m3::test::HttpReply Post(const GatewayProcess& gw, const json& body) {
  return HttpCall(gw.http_port(), "POST", "/v1/preprocess", body.dump());
}

LoopbackOrigin MakeOrigin() {
  return LoopbackOrigin([](const std::string& path) -> ScriptedReply {
    if (path == "/img.png") return {200, {}, Image("img02_451x301.png")};
    if (path == "/video.mkv") return {200, {}, Video()};
    if (path == "/stall") {
      ScriptedReply r;
      r.never_answer = true;
      return r;
    }
    if (path == "/big") return {200, {}, std::string(3 << 20, 'x')};
    if (path == "/to-metadata") return {302, {{"Location", "http://169.254.169.254/"}}, ""};
    if (path == "/loopA") return {302, {{"Location", "/loopB"}}, ""};
    if (path == "/loopB") return {302, {{"Location", "/loopA"}}, ""};
    return {404, {}, ""};
  });
}

}  // namespace

TEST_CASE("serve --preprocess-only answers like the media library and the goldens") {
  auto origin = MakeOrigin();
  std::string local_dir = m3::test::TempDir();
  m3::test::WriteFile(local_dir + "/a.png", Image("img00_53x37.png"));
  GatewayProcess gw({"serve", "--preprocess-only", "--port", "0", "--model", kModel, "--workers",
                     "2", "--allow-media-host", "127.0.0.1:" + std::to_string(origin.port()),
                     "--allow-local-media", local_dir, "--fetch-timeout-ms", "1500",
                     "--max-image-bytes", "2000000", "--max-body-bytes", "8000000"});

  SUBCASE("health") {
    auto r = HttpCall(gw.http_port(), "GET", "/health");
    CHECK(r.status == 200);
    CHECK(json::parse(r.body)["status"] == "ok");
  }

  SUBCASE("golden images through data: URIs") {
    auto golden = m3::SafetensorsFile::Open(m3::test::DataPath("m3-tiny/preprocess.safetensors"));
    for (const char* name :
         {"img00_53x37", "img01_224x224", "img03_1900x17", "photo_chelsea_451x300"}) {
      CAPTURE(name);
      std::string png = Image(std::string(name) + ".png");
      auto r =
          Post(gw, {{"content", {ImagePart(DataUri("image/png", png))}}, {"max_pixels", 150528}});
      REQUIRE(r.status == 200);
      CHECK(r.headers["content-type"] == "application/octet-stream");
      m3::media::MediaOptions options;
      options.max_pixels = 150528;
      CheckSameTensors(r.body, Expected({{true, png}}, options));
      auto reply = m3::SafetensorsFile::FromBytes(r.body, "reply");
      auto got = m3::ToFloat32(reply.Get("pixel_values"), "pixel_values");
      auto want = m3::ToFloat32(golden.Get(std::string(name) + ".pixel_values"), "golden");
      REQUIRE(got.size() == want.size());
      double max_abs = 0, sum = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        double d = std::fabs(double(got[i]) - double(want[i]));
        max_abs = std::max(max_abs, d);
        sum += d;
      }
      CHECK(max_abs <= 0.02);
      CHECK(sum / double(got.size()) <= 1e-3);
      CHECK(m3::ToInt64(reply.Get("image_grid_thw"), "g") ==
            m3::ToInt64(golden.Get(std::string(name) + ".image_grid_thw"), "g"));
    }
  }

  SUBCASE("images and videos from loopback URLs, local files and messages, in order") {
    json body = {{"messages",
                  {{{"role", "system"}, {"content", "be brief"}},
                   {{"role", "user"},
                    {"content",
                     {{{"type", "text"}, {"text", "compare"}},
                      ImagePart(origin.Url("/img.png")),
                      VideoPart(origin.Url("/video.mkv")),
                      ImagePart("file://" + local_dir + "/a.png")}}}}}};
    auto r = Post(gw, body);
    REQUIRE_MESSAGE(r.status == 200, r.body);
    CheckSameTensors(r.body, Expected({{true, Image("img02_451x301.png")},
                                       {false, Video()},
                                       {true, Image("img00_53x37.png")}},
                                      {}));
    auto reply = m3::SafetensorsFile::FromBytes(r.body, "reply");
    json items = json::parse(reply.metadata().at("items"));
    REQUIRE(items.size() == 3);
    CHECK(items[1]["kind"] == "video");
    CHECK(items[0]["placeholder_tokens"].get<int64_t>() > 0);
    CHECK(reply.Has("video_timestamps"));

    body["response_format"] = "json";
    auto j = Post(gw, body);
    REQUIRE(j.status == 200);
    json parsed = json::parse(j.body);
    for (const auto& name : reply.Names()) {
      CAPTURE(name);
      auto view = reply.Get(name);
      const json& t = parsed["tensors"][name];
      CHECK(t["shape"].get<std::vector<int64_t>>() == view.shape);
      CHECK(m3::net::Base64Decode(t["data"].get<std::string>()) ==
            std::string(reinterpret_cast<const char*>(view.data), view.nbytes));
    }
    CHECK(parsed["items"] == items);
  }

  SUBCASE("bad input gets the right status and an OpenAI error body") {
    std::string png = Image("img00_53x37.png");
    struct Case {
      std::string url;
      int status;
      std::string code;
    };
    std::string port = std::to_string(origin.port());
    std::vector<Case> cases = {
        {DataUri("image/png", "this is plain text, not an image"), 415, "unsupported_media_type"},
        {DataUri("image/png", png.substr(0, 200)), 400, ""},  // truncated PNG: media library's code
        {"data:image/png;base64,", 400, "invalid_request"},
        {"data:image/png;base64,iVBO%%%w0KGgo", 400, "invalid_request"},
        {"data:image/png;base64,iVB*Rw0KGgo=", 400, "invalid_request"},
        {"http://127.0.0.1:1/x.png", 400, "media_url_refused"},
        {"http://169.254.169.254/latest/meta-data/", 400, "media_url_refused"},
        {"http://10.0.0.1/x.png", 400, "media_url_refused"},
        {"http://[::1]:" + port + "/img.png", 400, "media_url_refused"},
        {"http://localhost:" + port + "/img.png", 400, "media_url_refused"},
        {origin.Url("/to-metadata"), 400, "media_url_refused"},
        {origin.Url("/loopA"), 400, "invalid_request"},
        {origin.Url("/stall"), 504, "media_fetch_timeout"},
        {origin.Url("/big"), 413, "payload_too_large"},
        {origin.Url("/missing"), 400, "invalid_request"},
        {"file:///etc/passwd", 400, "media_url_refused"},
        {"gopher://example.com/x", 400, "invalid_request"},
    };
    for (const auto& c : cases) {
      CAPTURE(c.url.substr(0, 80));
      auto r = Post(gw, {{"content", {{{"type", "text"}, {"text", "hi"}}, ImagePart(c.url)}}});
      if (c.code.empty()) {
        CHECK((r.status == 400 || r.status == 422));
      } else {
        CHECK(r.status == c.status);
      }
      json e = ErrorOf(r);
      if (!c.code.empty()) CHECK(e["code"] == c.code);
      CHECK(e["param"] == "content[1].image_url.url");
      CHECK(e["type"] == (r.status < 500 ? "invalid_request_error" : "server_error"));
    }
    // A video part that holds an image is refused by the bytes, not the declared type.
    auto wrong_kind = Post(gw, {{"content", {VideoPart(DataUri("video/mp4", png))}}});
    CHECK(wrong_kind.status == 415);

    auto malformed = HttpCall(gw.http_port(), "POST", "/v1/preprocess", "{\"content\": [");
    CHECK(malformed.status == 400);
    ErrorOf(malformed);
    CHECK(Post(gw, json::array()).status == 400);
    CHECK(Post(gw, {{"content", {{{"type", "text"}, {"text", "no media"}}}}}).status == 400);
    CHECK(Post(gw, {{"content", {ImagePart(DataUri("image/png", png))}}, {"max_pixels", -5}})
              .status == 400);
    CHECK(
        Post(gw, {{"content", {ImagePart(DataUri("image/png", png))}}, {"response_format", "xml"}})
            .status == 400);
    CHECK(HttpCall(gw.http_port(), "GET", "/v1/preprocess").status == 405);
    CHECK(HttpCall(gw.http_port(), "POST", "/v1/nothing", "{}").status == 404);
    auto huge = HttpCall(gw.http_port(), "POST", "/v1/preprocess", std::string(9000000, ' '));
    CHECK(huge.status == 413);
    // The server still works after all of that.
    CHECK(Post(gw, {{"content", {ImagePart(DataUri("image/png", png))}}}).status == 200);
  }

  CHECK(gw.Terminate() == 0);  // graceful shutdown on SIGTERM
}

TEST_CASE("a full queue answers 429 at once while other requests complete") {
  // The origin holds every answer until the test releases it, so the one fetch thread and the
  // one queue slot stay taken however the four requests are spread in time. (Remote media are
  // fetched on the fetch pool, so a held origin occupies no CPU worker.)
  std::atomic<bool> release{false};
  LoopbackOrigin origin([&](const std::string&) -> ScriptedReply {
    for (int i = 0; i < 1000 && !release; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return {200, {}, Image("img00_53x37.png")};
  });
  GatewayProcess gw({"serve", "--preprocess-only", "--port", "0", "--model", kModel, "--workers",
                     "1", "--fetch-threads", "1", "--queue-limit", "1", "--allow-media-host",
                     "127.0.0.1:" + std::to_string(origin.port())});
  json body = {{"content", {ImagePart(origin.Url("/held.png"))}}};
  std::vector<std::future<m3::test::HttpReply>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.push_back(std::async(std::launch::async, [&] { return Post(gw, body); }));
  }
  // Two requests must be refused at once; wait (bounded) for them before releasing the rest.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    int ready = 0;
    for (auto& c : calls)
      ready += c.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
    if (ready >= 2 || std::chrono::steady_clock::now() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  release = true;
  int ok = 0, busy = 0;
  for (auto& c : calls) {
    auto r = c.get();
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++busy;
      CHECK(ErrorOf(r)["code"] == "server_busy");
      CHECK(ErrorOf(r)["type"] == "rate_limit_error");  // OpenAI's 429s, not a bad request
    }
  }
  CHECK(ok == 2);
  CHECK(busy == 2);
  CHECK(HttpCall(gw.http_port(), "GET", "/health").status == 200);
}
