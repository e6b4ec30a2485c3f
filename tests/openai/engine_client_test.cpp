// The engine client against real `m3-engine serve` processes on the chat-e2e model: a greedy
// stream gives the reference's tokens, a cancelled stream is aborted in the engine, the
// ModelInfo check refuses another model, and the router goes around a killed engine (503 when
// none is left).
#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "gateway/engine_client/engine_router.h"
#include "gateway/openai/request_error.h"
#include "tests/engine_server/server_process.h"
#include "tests/test_util.h"

using namespace m3::engine_client;
namespace v1 = m3::engine::v1;
using m3::test::ServerProcess;
using namespace std::chrono_literals;

namespace {

const char* kModel = "chat-e2e/model";

nlohmann::json TextCase() {
  std::ifstream in(m3::test::DataPath("chat-e2e/chat_cases.json"));
  const nlohmann::json cases = nlohmann::json::parse(in);
  for (const auto& c : cases) {
    if (c["name"] == "text") return c;
  }
  throw std::runtime_error("no text case");
}

ExpectedModel Expected() {
  return LoadExpectedModel(m3::test::DataPath(kModel), 0);
}

v1::GenerateRequest Request(const nlohmann::json& c, int max_tokens) {
  v1::GenerateRequest r;
  static std::atomic<int> next{0};
  r.set_request_id("test-" + std::to_string(next++));
  for (int id : c["prompt_ids"]) r.add_token_ids(id);
  r.mutable_sampling()->set_temperature(0.0f);
  r.mutable_sampling()->set_max_tokens(max_tokens);
  r.mutable_sampling()->set_ignore_eos(true);
  return r;
}

// Collects one stream; Wait() returns once on_done has run.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  int messages = 0;
  v1::GenerateResponse last;
  bool done = false;
  grpc::Status status;

  GenerateCall::Callbacks Callbacks() {
    return {[this](v1::GenerateResponse&& r) {
              std::lock_guard<std::mutex> lock(mu);
              tokens.insert(tokens.end(), r.token_ids().begin(), r.token_ids().end());
              ++messages;
              last = std::move(r);
              cv.notify_all();
            },
            [this](const grpc::Status& s) {
              std::lock_guard<std::mutex> lock(mu);
              status = s;
              done = true;
              cv.notify_all();
            }};
  }
  bool Wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [this] { return done; });
  }
  bool WaitMessages(int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return messages >= n || done; });
  }
};

RouterOptions FastOptions() {
  RouterOptions o;
  o.health_interval = 100ms;
  o.endpoint.probe_timeout = 2000ms;
  return o;
}

// Polls `pred` for up to `timeout`.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

}  // namespace

TEST_CASE("a greedy stream gives the reference's completion; ModelInfo is checked") {
  ServerProcess server(kModel);
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  EngineRouter router({address}, Expected(), FastOptions());
  REQUIRE(router.Start() == 1);
  const auto info = router.endpoints()[0]->model_info();
  REQUIRE(info.has_value());
  CHECK(info->max_model_len() > 0);

  const nlohmann::json c = TextCase();
  const std::vector<int32_t> want = c["completion_ids"].get<std::vector<int32_t>>();
  Collector got;
  auto engine = router.Pick();
  auto call = engine->Generate(Request(c, static_cast<int>(want.size())), got.Callbacks());
  REQUIRE(got.Wait(60s));
  CHECK(got.status.ok());
  CHECK(got.tokens == want);
  CHECK(got.last.finish_reason() == v1::GenerateResponse::FINISH_REASON_LENGTH);
  CHECK(got.last.prompt_tokens() == static_cast<int>(c["prompt_ids"].size()));
  CHECK(got.last.completion_tokens() == static_cast<int>(want.size()));
  CHECK(call->done());
  CHECK(Eventually([&] { return engine->outstanding() == 0; }, 2s));

  // An engine of another model is refused at start, naming what differs.
  ExpectedModel other = Expected();
  other.vocab_size += 1;
  other.eos_token_ids = {99};
  EngineRouter wrong({address}, other, FastOptions());
  try {
    wrong.Start();
    FAIL("another model was accepted");
  } catch (const m3::Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find(address) != std::string::npos);
    CHECK(msg.find("vocab_size") != std::string::npos);
    CHECK(msg.find("eos_token_ids") != std::string::npos);
  }
  CHECK_THROWS_AS(wrong.Pick(), m3::openai::RequestError);
}

TEST_CASE("cancelling a stream aborts the request in the engine") {
  ServerProcess server(kModel);
  EngineRouter router({"127.0.0.1:" + std::to_string(server.port())}, Expected(), FastOptions());
  REQUIRE(router.Start() == 1);
  auto engine = router.Pick();
  Collector got;
  auto call = engine->Generate(Request(TextCase(), 3000), got.Callbacks());
  REQUIRE(got.WaitMessages(1, 60s));
  REQUIRE_FALSE(got.done);
  call->Cancel();
  REQUIRE(got.Wait(5s));
  CHECK(got.status.error_code() == grpc::StatusCode::CANCELLED);
  CHECK(got.tokens.size() < 3000);
  call->Cancel();  // after the end: nothing happens
  // The engine dropped the request: nothing runs there any more.
  CHECK(Eventually(
      [&] {
        router.ProbeAll();
        const auto h = engine->last_health();
        return h && h->running_requests() == 0 && h->waiting_requests() == 0;
      },
      5s));
  CHECK(engine->outstanding() == 0);
  CHECK(engine->healthy());
}

TEST_CASE("two engines: least outstanding first; a killed engine is ejected; none left is 503") {
  ServerProcess a(kModel);
  ServerProcess b(kModel);
  const std::string addr_a = "127.0.0.1:" + std::to_string(a.port());
  const std::string addr_b = "127.0.0.1:" + std::to_string(b.port());
  EngineRouter router({addr_a, addr_b}, Expected(), FastOptions());
  REQUIRE(router.Start() == 2);

  // A long stream on the first engine makes the second the less loaded one.
  auto first = router.Pick();
  CHECK(first->address() == addr_a);
  Collector long_stream;
  auto call = first->Generate(Request(TextCase(), 3000), long_stream.Callbacks());
  REQUIRE(long_stream.WaitMessages(1, 60s));
  CHECK(router.Pick()->address() == addr_b);

  // Kill the engine under the stream: the stream ends with an error promptly, and the engine
  // is ejected.
  const auto killed_at = std::chrono::steady_clock::now();
  a.Stop(SIGKILL);
  REQUIRE(long_stream.Wait(5s));
  CHECK(std::chrono::steady_clock::now() - killed_at < 2s);
  CHECK_FALSE(long_stream.status.ok());
  CHECK(Eventually([&] { return !router.endpoints()[0]->healthy(); }, 5s));
  CHECK(router.healthy_count() == 1);

  // New requests go to the remaining engine and complete.
  const nlohmann::json c = TextCase();
  const std::vector<int32_t> want = c["completion_ids"].get<std::vector<int32_t>>();
  for (int i = 0; i < 3; ++i) {
    auto engine = router.Pick();
    CHECK(engine->address() == addr_b);
    Collector got;
    engine->Generate(Request(c, static_cast<int>(want.size())), got.Callbacks());
    REQUIRE(got.Wait(60s));
    CHECK_MESSAGE(got.status.ok(), got.status.error_message());
    CHECK(got.tokens == want);
  }

  b.Stop(SIGKILL);
  CHECK(Eventually([&] { return router.healthy_count() == 0; }, 5s));
  try {
    router.Pick();
    FAIL("a dead engine was picked");
  } catch (const m3::openai::RequestError& e) {
    CHECK(e.http_status() == 503);
    CHECK(e.error_code() == "no_engine_available");
    CHECK(std::string(e.what()).find(addr_a) != std::string::npos);
  }
}

TEST_CASE("bad router configuration") {
  CHECK_THROWS_AS(EngineRouter({}, Expected()), m3::Error);
  CHECK_THROWS_AS(EngineRouter({"h:1", "h:1"}, Expected()), m3::Error);
  // Nothing listens here: the engine stays unhealthy, and requests get a 503.
  EngineRouter router({"127.0.0.1:1"}, Expected(), FastOptions());
  CHECK(router.Start() == 0);
  CHECK_THROWS_AS(router.Pick(), m3::openai::RequestError);
}

TEST_CASE("two engines: round-robin takes turns; cache-aware keeps a prompt on its engine") {
  ServerProcess a(kModel);
  ServerProcess b(kModel);
  const std::vector<std::string> addresses = {"127.0.0.1:" + std::to_string(a.port()),
                                              "127.0.0.1:" + std::to_string(b.port())};

  RouterOptions round_robin = FastOptions();
  round_robin.routing = RoutingPolicyKind::kRoundRobin;
  EngineRouter rr(addresses, Expected(), round_robin);
  REQUIRE(rr.Start() == 2);
  std::vector<std::string> turns;
  for (int i = 0; i < 4; ++i) turns.push_back(rr.Pick()->address());
  CHECK(turns == std::vector<std::string>{addresses[0], addresses[1], addresses[0], addresses[1]});

  RouterOptions cache_aware = FastOptions();
  cache_aware.routing = RoutingPolicyKind::kCacheAware;
  cache_aware.cache_aware.block_tokens = 16;  // the 33-token text prompt is two blocks
  EngineRouter router(addresses, Expected(), cache_aware);
  REQUIRE(router.Start() == 2);
  const nlohmann::json c = TextCase();
  const std::vector<int32_t> prompt = c["prompt_ids"].get<std::vector<int32_t>>();
  auto run = [&](const std::shared_ptr<EngineEndpoint>& engine, const nlohmann::json& which) {
    Collector got;
    engine->Generate(Request(which, 2), got.Callbacks());
    REQUIRE(got.Wait(60s));
    CHECK_MESSAGE(got.status.ok(), got.status.error_message());
  };
  auto home = router.Pick({}, prompt);
  run(home, c);
  // A long stream keeps the prompt's engine busier than the other one...
  Collector long_stream;
  auto busy = home->Generate(Request(c, 3000), long_stream.Callbacks());
  REQUIRE(long_stream.WaitMessages(1, 60s));
  REQUIRE(home->outstanding() == 1);
  // ...yet the same prompt goes back to it (within the imbalance allowed), its prefix cached
  // there; a different prompt goes by load to the other engine.
  for (int i = 0; i < 2; ++i) {
    auto again = router.Pick({}, prompt);
    CHECK(again == home);
    run(again, c);
  }
  nlohmann::json other_case = c;
  other_case["prompt_ids"][0] = c["prompt_ids"][1];
  const std::vector<int32_t> other = other_case["prompt_ids"].get<std::vector<int32_t>>();
  auto elsewhere = router.Pick({}, other);
  CHECK(elsewhere != home);
  run(elsewhere, other_case);
  busy->Cancel();
  REQUIRE(long_stream.Wait(5s));

  // A probe skips an endpoint the router's monitor is probing at that moment, and on a loaded
  // machine the monitor's first probes may not have answered yet: probe until both have a
  // health report that counts the repeats.
  REQUIRE(Eventually(
      [&] {
        router.ProbeAll();
        const auto h = home->last_health();
        return h.has_value() && elsewhere->last_health().has_value() &&
               h->prefix_cache_hit_tokens() >= 32;  // the two repeats at least
      },
      20s));
  CHECK(elsewhere->last_health()->prefix_cache_hit_tokens() == 0);
}

TEST_CASE("destroying the router mid-stream cancels the stream and waits for its end") {
  // The stream's ClientContext holds the channel: were it let go after the router, the
  // channel's last reference would drop on the gRPC thread running OnDone, which then frees
  // the completion queue it polls (the abort at exit this test guards against).
  ServerProcess server(kModel);
  Collector got;
  std::shared_ptr<GenerateCall> call;
  {
    EngineRouter router({"127.0.0.1:" + std::to_string(server.port())}, Expected(), FastOptions());
    REQUIRE(router.Start() == 1);
    call = router.Pick()->Generate(Request(TextCase(), 3000), got.Callbacks());
    REQUIRE(got.WaitMessages(1, 60s));
    REQUIRE_FALSE(got.done);
  }
  // No waiting here: the router's destructor returned only once on_done had run.
  std::lock_guard<std::mutex> lock(got.mu);
  CHECK(got.done);
  CHECK(got.status.error_code() == grpc::StatusCode::CANCELLED);
  CHECK(call->done());
  call->Cancel();  // the handle outlives the router harmlessly
}
