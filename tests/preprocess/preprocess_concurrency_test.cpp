// StartPreprocess fetches a request's media items at once and decodes each as it arrives: N
// items each answered after D take about D, not N x D; the result keeps the request's order
// whatever order the items arrive in; the first error ends the request without waiting for
// the rest; the request's one deadline ends items that never arrive.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "gateway/media/m3_vision_processor.h"
#include "gateway/net/api_error.h"
#include "gateway/net/base64.h"
#include "gateway/preprocess/preprocess_pipeline.h"
#include "tests/net/loopback_http.h"
#include "tests/test_util.h"

namespace {

using namespace m3;
using namespace m3::net;
using namespace m3::preprocess;
using m3::content::MediaRef;
using Clock = std::chrono::steady_clock;

std::shared_ptr<const media::MediaPreprocessor> Preprocessor() {
  static auto pre = std::make_shared<const media::MediaPreprocessor>(
      std::make_shared<const media::M3VisionProcessor>(media::M3VisionConfig{}),
      media::MediaLimits{});
  return pre;
}

const std::string& Small() {
  static const std::string png = test::ReadFile(test::DataPath("m3-tiny/images/img00_53x37.png"));
  return png;
}
const std::string& Square() {
  static const std::string png = test::ReadFile(test::DataPath("m3-tiny/images/img01_224x224.png"));
  return png;
}

// /small-D.png and /square-D.png answer after D ms; /hang never answers; /404 at once.
test::LoopbackOrigin MakeOrigin() {
  return test::LoopbackOrigin([](const std::string& path) -> test::ScriptedReply {
    test::ScriptedReply r;
    if (path == "/hang") {
      r.never_answer = true;
      return r;
    }
    if (path == "/404") return {404, {}, "nope"};
    const size_t dash = path.find('-'), dot = path.find(".png");
    if (dash == std::string::npos || dot == std::string::npos) return {404, {}, ""};
    r.body = path.rfind("/small", 0) == 0 ? Small() : Square();
    r.delay_ms = std::stoi(path.substr(dash + 1, dot - dash - 1));
    return r;
  });
}

struct Outcome {
  std::unique_ptr<PreprocessResult> result;
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  Clock::duration took{};
};

Outcome Run(const test::LoopbackOrigin& origin, const std::vector<std::string>& urls,
            std::chrono::milliseconds request_timeout = std::chrono::milliseconds(10000)) {
  FetchOptions fetch;
  fetch.allowed_hosts = {"127.0.0.1:" + std::to_string(origin.port())};
  PreprocessLimits limits;
  limits.request_timeout = request_timeout;
  auto service = std::make_shared<const PreprocessService>(
      std::make_shared<const MediaFetcher>(fetch), Preprocessor(), limits);
  PreprocessPools pools{std::make_shared<WorkerPool>(2, 0), std::make_shared<WorkerPool>(1, 0)};
  PreprocessRequest request;
  for (size_t i = 0; i < urls.size(); ++i) {
    MediaRef ref;
    ref.url = urls[i].rfind("data:", 0) == 0 ? urls[i] : origin.Url(urls[i]);
    ref.param = "content[" + std::to_string(i) + "].image_url.url";
    request.items.push_back(ref);
  }
  service->Admit(request);
  auto promise = std::make_shared<std::promise<Outcome>>();
  auto future = promise->get_future();
  const auto start = Clock::now();
  StartPreprocess(service, pools, std::move(request),
                  [promise, start](PreprocessResult* result, std::exception_ptr error) {
                    Outcome out;
                    out.took = Clock::now() - start;
                    if (result) out.result = std::make_unique<PreprocessResult>(std::move(*result));
                    try {
                      if (error) std::rethrow_exception(error);
                    } catch (const Error& e) {
                      out.code = e.code();
                      out.message = e.what();
                    }
                    promise->set_value(std::move(out));
                  });
  REQUIRE(future.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  Outcome out = future.get();
  pools.workers->Shutdown();
  pools.fetch->Shutdown();
  return out;
}

std::array<int64_t, 3> GridOf(const std::string& png) {
  return Preprocessor()->ProcessImage(png, {}, nullptr).grid_thw;
}

}  // namespace

TEST_CASE("a request's items are fetched at once and decoded as they arrive, in order") {
  auto origin = MakeOrigin();
  constexpr int kItems = 4;
  constexpr int kDelayMs = 400;
  std::vector<std::string> urls;
  for (int i = 0; i < kItems; ++i) {
    urls.push_back((i % 2 ? "/square-" : "/small-") + std::to_string(kDelayMs) + ".png");
  }
  Outcome out = Run(origin, urls);
  REQUIRE_MESSAGE(out.result, out.message);
  CHECK(out.result->items.size() == kItems);
  // One after another they would take kItems x kDelayMs; at once, about kDelayMs.
  CHECK(out.took < std::chrono::milliseconds(kItems * kDelayMs * 6 / 10));
  CHECK(origin.requests() == kItems);
  for (int i = 0; i < kItems; ++i) {
    CHECK(out.result->items[static_cast<size_t>(i)].grid_thw == GridOf(i % 2 ? Square() : Small()));
  }
}

TEST_CASE("the result keeps request order when later items arrive first") {
  auto origin = MakeOrigin();
  // Item 0 arrives last, the data: URI item needs no network at all.
  Outcome out = Run(origin, {"/square-600.png", "/small-300.png",
                             "data:image/png;base64," + Base64Encode(Square()), "/small-0.png"});
  REQUIRE_MESSAGE(out.result, out.message);
  REQUIRE(out.result->items.size() == 4);
  CHECK(out.result->items[0].grid_thw == GridOf(Square()));
  CHECK(out.result->items[1].grid_thw == GridOf(Small()));
  CHECK(out.result->items[2].grid_thw == GridOf(Square()));
  CHECK(out.result->items[3].grid_thw == GridOf(Small()));
  CHECK(out.result->item_metadata.size() == 4);
  CHECK(out.result->item_metadata[0]["index"] == 0);
}

TEST_CASE("the first error ends the request without waiting for the other items") {
  auto origin = MakeOrigin();
  Outcome out = Run(origin, {"/hang", "/small-0.png", "/404", "/hang"});
  CHECK(!out.result);
  CHECK(out.code == ErrorCode::kInvalidArgument);
  CHECK(out.message.find("content[2].image_url.url") != std::string::npos);
  CHECK(out.message.find("HTTP 404") != std::string::npos);
  CHECK(out.took < std::chrono::seconds(5));  // the hanging items had 10 s
}

TEST_CASE("one deadline bounds all of a request's fetches") {
  auto origin = MakeOrigin();
  Outcome out =
      Run(origin, {"/hang", "/hang", "/small-0.png", "/hang"}, std::chrono::milliseconds(500));
  CHECK(!out.result);
  CHECK(out.code == ErrorCode::kDeadlineExceeded);
  CHECK(out.message.find("request's time") != std::string::npos);
  CHECK(out.took >= std::chrono::milliseconds(400));
  CHECK(out.took < std::chrono::seconds(5));  // not 3 x 500 ms, and nowhere near 30 s
}
