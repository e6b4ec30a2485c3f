// The preprocessing service's per-request limits and staging (issue 11 rows 2, 3, 6 and the
// queue rule): item, pixel and output-byte caps, the shared memory budget, one deadline across
// all fetches of a request, checks that need no I/O answered before anything is queued, and
// bounded request JSON.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "gateway/media/m3_vision_processor.h"
#include "gateway/net/api_error.h"
#include "gateway/net/base64.h"
#include "gateway/net/http_server.h"
#include "gateway/preprocess/preprocess_http.h"
#include "gateway/preprocess/preprocess_service.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace {

using namespace m3;
using namespace m3::net;
using namespace m3::preprocess;
using m3::content::MediaRef;

std::shared_ptr<const media::MediaPreprocessor> Preprocessor() {
  static auto pre = std::make_shared<const media::MediaPreprocessor>(
      std::make_shared<const media::M3VisionProcessor>(media::M3VisionConfig{}),
      media::MediaLimits{});
  return pre;
}

std::shared_ptr<PreprocessService> Service(PreprocessLimits limits = {},
                                           std::shared_ptr<MemoryBudget> memory = nullptr,
                                           FetchOptions fetch = {}) {
  return std::make_shared<PreprocessService>(std::make_shared<const MediaFetcher>(fetch),
                                             Preprocessor(), limits, std::move(memory));
}

const std::string& Png() {
  static const std::string png = test::ReadFile(test::DataPath("m3-tiny/images/img01_224x224.png"));
  return png;
}

PreprocessRequest Images(int n) {
  PreprocessRequest r;
  for (int i = 0; i < n; ++i) {
    MediaRef ref;
    ref.url = "data:image/png;base64," + Base64Encode(Png());
    ref.param = "content[" + std::to_string(i) + "].image_url.url";
    r.items.push_back(ref);
  }
  return r;
}

// The error code and message of running `f`.
template <typename F>
ErrorCode ErrorOf(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return ErrorCode::kInternal;  // no error at all: never what a test expects here
}

}  // namespace

TEST_CASE("limits: items, pixels and output bytes per request (row 2)") {
  PreprocessLimits limits;
  limits.max_items = 2;
  std::string msg;
  CHECK(ErrorOf([&] { Service(limits)->Admit(Images(3)); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("3 media items") != std::string::npos);
  CHECK(msg.find("limit of 2") != std::string::npos);
  CHECK_NOTHROW(Service(limits)->Admit(Images(2)));

  // max_pixels over the server's bound: refused before anything is fetched.
  PreprocessRequest huge = Images(1);
  huge.options.max_pixels = 12845056;
  limits.max_pixels = 1 << 20;
  CHECK(ErrorOf([&] { Service(limits)->Admit(huge); }, &msg) == ErrorCode::kInvalidArgument);
  CHECK(msg.find("max_pixels") != std::string::npos);

  // Pixels of all items together.
  limits = {};
  limits.max_pixels = 100000;  // one 224x224 image is 50176 pixels
  CHECK(Service(limits)->Run(Images(1)).items.size() == 1);
  CHECK(ErrorOf([&] { Service(limits)->Run(Images(3)); }, &msg) == ErrorCode::kTooLarge);
  CHECK(msg.find("pixels") != std::string::npos);
  // Output bytes: 224x224 RGB, two temporal copies, float32 = 1204224 bytes.
  limits = {};
  limits.max_output_bytes = 1 << 20;
  CHECK(ErrorOf([&] { Service(limits)->Run(Images(1)); }, &msg) == ErrorCode::kTooLarge);
  CHECK(msg.find("output tensors") != std::string::npos);
  CHECK(msg.find("1204224") != std::string::npos);
}

TEST_CASE("limits: the shared memory budget refuses with kResourceExhausted (row 3)") {
  auto memory = std::make_shared<MemoryBudget>(1 << 20);
  std::string msg;
  CHECK(ErrorOf([&] { Service({}, memory)->Run(Images(1)); }, &msg) ==
        ErrorCode::kResourceExhausted);
  CHECK(msg.find("memory budget") != std::string::npos);
  CHECK(memory->used() == 0);  // everything was given back
  auto roomy = std::make_shared<MemoryBudget>(64 << 20);
  CHECK(Service({}, roomy)->Run(Images(2)).items.size() == 2);
  CHECK(roomy->used() == 0);
}

TEST_CASE("limits: one deadline covers all fetches of a request (row 6)") {
  test::LoopbackOrigin origin([](const std::string&) {
    test::ScriptedReply r;
    r.never_answer = true;
    return r;
  });
  FetchOptions fetch;
  fetch.allowed_hosts = {"127.0.0.1:" + std::to_string(origin.port())};
  fetch.total_timeout = std::chrono::milliseconds(30000);  // each fetch alone would wait 30 s
  PreprocessLimits limits;
  limits.request_timeout = std::chrono::milliseconds(700);
  PreprocessRequest r;
  for (int i = 0; i < 3; ++i) {
    MediaRef ref;
    ref.url = origin.Url("/hang" + std::to_string(i) + ".png");
    ref.param = "content[" + std::to_string(i) + "].image_url.url";
    r.items.push_back(ref);
  }
  const auto start = std::chrono::steady_clock::now();
  std::string msg;
  CHECK(ErrorOf([&] { Service(limits, nullptr, fetch)->Run(r); }, &msg) ==
        ErrorCode::kDeadlineExceeded);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(msg.find("request's time") != std::string::npos);
  CHECK(msg.find("content[0]") != std::string::npos);
}

TEST_CASE("admission: what needs no I/O is refused before queueing") {
  auto service = Service();
  auto refuse = [&](const std::string& url, ErrorCode code, const std::string& needle) {
    PreprocessRequest r;
    MediaRef ref;
    ref.url = url;
    ref.param = "content[0].image_url.url";
    r.items.push_back(ref);
    std::string msg;
    CHECK(ErrorOf([&] { service->Admit(r); }, &msg) == code);
    CHECK_MESSAGE(msg.find(needle) != std::string::npos, msg);
    CHECK(msg.find("content[0].image_url.url") != std::string::npos);
  };
  refuse("http://169.254.169.254/latest/meta-data/", ErrorCode::kPermissionDenied, "169.254");
  refuse("http://localhost:8080/a.png", ErrorCode::kPermissionDenied, "localhost");
  refuse("http://[::1]/a.png", ErrorCode::kPermissionDenied, "::1");
  refuse("ftp://example.com/a.png", ErrorCode::kInvalidArgument, "ftp");
  refuse("/etc/passwd", ErrorCode::kPermissionDenied, "local");
  refuse("data:image/png;base64", ErrorCode::kInvalidArgument, "','");
  // A NUL in the media type is shown, not allowed to cut the message (row 10).
  refuse(std::string("data:image/png\0evil;base64,AAAA", 31), ErrorCode::kInvalidArgument,
         "image/png\\x00evil");
  refuse("data:image/png;base64," + std::string(30 << 20, 'A'), ErrorCode::kTooLarge,
         "over the limit");
}

TEST_CASE("http: invalid requests are answered while every worker is busy") {
  PreprocessPools pools{std::make_shared<WorkerPool>(1, 4), std::make_shared<WorkerPool>(2, 8)};
  std::mutex mu;
  std::condition_variable cv;
  bool release = false, started = false;
  REQUIRE(pools.workers->TrySubmit([&] {
    std::unique_lock lock(mu);
    started = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  }));
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return started; });
  }
  auto service = Service();
  HttpServer server(HttpServerOptions{}, MakePreprocessHttpHandler(service, pools),
                    MakePreprocessHeaderCheck(pools));
  server.Start();
  const uint16_t port = server.port();
  auto call = [&](const std::string& body) {
    return test::HttpCall(port, "POST", "/v1/preprocess", body, "application/json", 3000);
  };
  test::HttpReply bad_json = call("{\"content\": [");
  CHECK(bad_json.status == 400);
  CHECK(bad_json.body.find("not valid JSON") != std::string::npos);
  test::HttpReply refused =
      call(R"({"content":[{"type":"image_url","image_url":{"url":"http://10.0.0.1/a.png"}}]})");
  CHECK(refused.status == 400);
  CHECK(refused.body.find("media_url_refused") != std::string::npos);
  test::HttpReply too_many = call(R"({"content":[)" + [] {
    std::string parts;
    for (int i = 0; i < 65; ++i) {
      parts += std::string(i ? "," : "") +
               R"({"type":"image_url","image_url":"data:image/png;base64,AAAA"})";
    }
    return parts;
  }() + "]}");
  CHECK(too_many.status == 400);
  CHECK(too_many.body.find("limit of 64") != std::string::npos);
  // Request JSON nested 20000 deep (row 8's request half): refused from the text.
  test::HttpReply deep = call(std::string(20000, '[') + std::string(20000, ']'));
  CHECK(deep.status == 400);
  CHECK(deep.body.find("nested") != std::string::npos);
  CHECK(test::HttpCall(port, "GET", "/health", "", "", 3000).status == 200);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  // A valid request goes through once the worker is free.
  test::HttpReply ok =
      call(R"({"content":[{"type":"image_url","image_url":"data:image/png;base64,)" +
           Base64Encode(Png()) + R"("}],"response_format":"json"})");
  CHECK(ok.status == 200);
  server.Stop(std::chrono::milliseconds(1000));
  pools.fetch->Shutdown();
  pools.workers->Shutdown();
}
