// GenerationSession, answered by the API's GenerationResponder, against real `m3-engine serve`
// processes: a chat completion streamed and whole gives the reference's text, a stop string
// ends the output and cancels the engine request, a request whose engine died before it was
// ejected is retried on the other engine, an engine killed mid-stream ends the stream with an
// error event promptly, and no engine is a 503.
#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "gateway/api/generation_responder.h"
#include "gateway/engine_client/engine_request.h"
#include "gateway/engine_client/generation_session.h"
#include "gateway/openai/output_options.h"
#include "gateway/openai/response_formatter.h"
#include "gateway/tokenizer/tokenizer.h"
#include "tests/engine_server/server_process.h"
#include "tests/test_util.h"

using namespace m3::engine_client;
namespace v1 = m3::engine::v1;
using m3::test::ServerProcess;
using Json = nlohmann::ordered_json;
using namespace std::chrono_literals;

namespace {

const char* kModel = "chat-e2e/model";

const m3::tok::Tokenizer& Tok() {
  static const m3::tok::Tokenizer tok =
      m3::tok::Tokenizer::FromFile(m3::test::DataPath("chat-e2e/model/tokenizer.json"));
  return tok;
}

Json TextCase() {
  const Json cases =
      Json::parse(m3::test::ReadFile(m3::test::DataPath("chat-e2e/chat_cases.json")));
  for (const auto& c : cases) {
    if (c["name"] == "text") return c;
  }
  throw std::runtime_error("no text case");
}

// A session's request and the response formatter its responder answers with.
struct Generation {
  GenerationRequest request;
  std::unique_ptr<m3::openai::ResponseFormatter> formatter;
  m3::api::FormatterFactory remake;  // the same formatter again, for a retry
};

Generation Request(int max_tokens, bool stream, std::vector<std::string> stop = {},
                   bool chat = true) {
  static std::atomic<int> next{0};
  const Json c = TextCase();
  m3::openai::SamplingRequest s;
  s.temperature = 0;
  s.stop = std::move(stop);
  const std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>();
  Generation r;
  r.request.request =
      BuildGenerateRequest("s-" + std::to_string(next++), ids, {}, s, max_tokens, "F32");
  const std::vector<int64_t> eos = {2};
  if (chat) {
    m3::openai::ChatRequest req;
    req.sampling = s;
    r.remake = [options =
                    m3::openai::ChatOutputOptions(req, eos, c["prompt"].get<std::string>(), {}),
                stream] {
      return m3::openai::MakeChatFormatter(Tok(), {"chatcmpl-x", 1, "m3"}, options, stream, stream,
                                           false);
    };
  } else {
    m3::openai::CompletionRequest req;
    req.sampling = s;
    r.remake = [options = m3::openai::CompletionOutputOptions(req, eos), stream] {
      return m3::openai::MakeCompletionFormatter(Tok(), {"cmpl-x", 1, "m3"}, options, stream,
                                                 stream, false);
    };
  }
  r.formatter = r.remake();
  return r;
}

struct Result {
  std::mutex mu;
  std::condition_variable cv;
  std::string written;
  int writes = 0;
  bool done = false;
  int status = 0;
  std::string body;
  std::chrono::steady_clock::time_point done_at;

  m3::api::ResponseSink Sink() {
    return {[this](std::string events) {
              std::lock_guard<std::mutex> lock(mu);
              written += events;
              ++writes;
              cv.notify_all();
            },
            [this](int s, std::string b) {
              std::lock_guard<std::mutex> lock(mu);
              CHECK_FALSE(done);  // exactly once
              status = s;
              body = std::move(b);
              done = true;
              done_at = std::chrono::steady_clock::now();
              cv.notify_all();
            }};
  }
  bool Wait(std::chrono::milliseconds t) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, t, [this] { return done; });
  }
  bool WaitWrites(int n, std::chrono::milliseconds t) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, t, [&] { return writes >= n || done; });
  }
};

// reasoning + content of an SSE text.
std::string SseText(const std::string& sse, std::string* finish = nullptr) {
  std::string text;
  size_t at = 0;
  while ((at = sse.find("data: {", at)) != std::string::npos) {
    const size_t end = sse.find("\n\n", at);
    const Json chunk = Json::parse(sse.substr(at + 6, end - at - 6));
    at = end;
    if (!chunk.contains("choices")) continue;
    for (const auto& ch : chunk["choices"]) {
      const Json& d = ch["delta"];
      if (d.contains("reasoning_content")) text += d["reasoning_content"].get<std::string>();
      if (d.contains("content")) text += d["content"].get<std::string>();
      if (finish && !ch["finish_reason"].is_null()) *finish = ch["finish_reason"];
    }
  }
  return text;
}

// The session with the API's responder over `sink`, as the gateway starts it.
std::shared_ptr<GenerationSession> StartSession(EngineRouter& router, Generation g,
                                                m3::api::ResponseSink sink) {
  return GenerationSession::Start(
      router, std::move(g.request),
      m3::api::MakeGenerationResponder(std::move(g.formatter), std::move(sink),
                                       std::move(g.remake)));
}

// The responder, with the tokens it is handed counted (a whole answer writes nothing before
// its end: the count says the engine has started producing it).
class CountingObserver : public GenerationObserver {
 public:
  CountingObserver(std::shared_ptr<GenerationObserver> inner, std::atomic<int>& tokens)
      : inner_(std::move(inner)), tokens_(tokens) {}
  bool OnTokens(std::span<const int32_t> ids,
                std::span<const m3::openai::TokenLogprob> logprobs) override {
    tokens_ += static_cast<int>(ids.size());
    return inner_->OnTokens(ids, logprobs);
  }
  void OnFinish(m3::text::FinishReason reason, const m3::openai::Usage& usage) override {
    inner_->OnFinish(reason, usage);
  }
  void OnError(const GenerationError& error) override { inner_->OnError(error); }
  void OnCancelled() override { inner_->OnCancelled(); }
  bool Restart() override {
    ++restarts;
    return inner_->Restart();
  }
  std::atomic<int> restarts{0};

 private:
  std::shared_ptr<GenerationObserver> inner_;
  std::atomic<int>& tokens_;
};

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds t) {
  const auto until = std::chrono::steady_clock::now() + t;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

RouterOptions Options(std::chrono::milliseconds interval) {
  RouterOptions o;
  o.health_interval = interval;
  return o;
}

std::string Address(const ServerProcess& s) {
  return "127.0.0.1:" + std::to_string(s.port());
}

}  // namespace

TEST_CASE("a chat completion, whole and streamed; a stop string cancels the engine request") {
  ServerProcess server(kModel);
  EngineRouter router({Address(server)}, LoadExpectedModel(m3::test::DataPath(kModel), 0),
                      Options(100ms));
  REQUIRE(router.Start() == 1);
  const Json c = TextCase();
  const int n = static_cast<int>(c["completion_ids"].size());
  const std::string want = c["completion_text"];

  Result whole;
  StartSession(router, Request(n, false), whole.Sink());
  REQUIRE(whole.Wait(60s));
  CHECK(whole.status == 200);
  CHECK(whole.writes == 0);
  const Json body = Json::parse(whole.body);
  CHECK(body["choices"][0]["message"]["reasoning_content"].get<std::string>() +
            (body["choices"][0]["message"]["content"].is_null()
                 ? std::string()
                 : body["choices"][0]["message"]["content"].get<std::string>()) ==
        want);
  CHECK(body["usage"]["prompt_tokens"] == c["prompt_ids"].size());

  Result streamed;
  StartSession(router, Request(n, true), streamed.Sink());
  REQUIRE(streamed.Wait(60s));
  CHECK(streamed.status == 200);
  CHECK(streamed.body.empty());
  std::string finish;
  CHECK(SseText(streamed.written, &finish) == want);
  CHECK(finish == "length");
  CHECK(streamed.written.find("\"usage\":{\"prompt_tokens\"") != std::string::npos);
  CHECK(streamed.written.substr(streamed.written.size() - 14) == "data: [DONE]\n\n");

  // "lazy" comes a few tokens in; the request could run for 3000 tokens otherwise.
  Result stopped;
  StartSession(router, Request(3000, true, {"lazy"}), stopped.Sink());
  REQUIRE(stopped.Wait(60s));
  CHECK(SseText(stopped.written, &finish) == want.substr(0, want.find("lazy")));
  CHECK(finish == "stop");
  auto engine = router.endpoints()[0];
  bool idle = false;
  for (int i = 0; i < 100 && !idle; ++i) {
    router.ProbeAll();
    const auto h = engine->last_health();
    idle = h && h->running_requests() == 0 && engine->outstanding() == 0;
    if (!idle) std::this_thread::sleep_for(20ms);
  }
  CHECK(idle);

  // A text completion: the same tokens as raw text, streamed and whole.
  Result text_whole, text_stream;
  StartSession(router, Request(n, false, {}, false), text_whole.Sink());
  StartSession(router, Request(n, true, {}, false), text_stream.Sink());
  REQUIRE(text_whole.Wait(60s));
  REQUIRE(text_stream.Wait(60s));
  const Json tb = Json::parse(text_whole.body);
  CHECK(tb["object"] == "text_completion");
  CHECK(tb["choices"][0]["text"] == want);
  std::string streamed_text;
  for (size_t at = 0; (at = text_stream.written.find("data: {", at)) != std::string::npos;) {
    const size_t end = text_stream.written.find("\n\n", at);
    const Json chunk = Json::parse(text_stream.written.substr(at + 6, end - at - 6));
    at = end;
    for (const auto& ch : chunk["choices"]) streamed_text += ch["text"].get<std::string>();
  }
  CHECK(streamed_text == want);

  // The client goes away mid-stream: the engine request is cancelled, finish gets 499.
  Result gone;
  auto session = StartSession(router, Request(3000, true), gone.Sink());
  REQUIRE(gone.WaitWrites(1, 60s));
  session->Cancel();
  REQUIRE(gone.Wait(5s));
  CHECK(gone.status == 499);
}

TEST_CASE("retry before the first token; an engine killed mid-stream; no engine left") {
  ServerProcess a(kModel);
  ServerProcess b(kModel);
  // No health probes during the test: the router learns about deaths from calls only.
  EngineRouter router({Address(a), Address(b)}, LoadExpectedModel(m3::test::DataPath(kModel), 0),
                      Options(3600s));
  REQUIRE(router.Start() == 2);
  const Json c = TextCase();
  const int n = static_cast<int>(c["completion_ids"].size());

  a.Stop(SIGKILL);
  Result retried;
  StartSession(router, Request(n, false), retried.Sink());
  REQUIRE(retried.Wait(60s));
  CHECK(retried.status == 200);
  const Json body = Json::parse(retried.body);
  CHECK(body["choices"][0]["finish_reason"] == "length");

  // Killed mid-stream: an error event and [DONE] within a second.
  Result killed;
  StartSession(router, Request(3000, true), killed.Sink());
  REQUIRE(killed.WaitWrites(1, 60s));
  const auto kill_at = std::chrono::steady_clock::now();
  b.Stop(SIGKILL);
  REQUIRE(killed.Wait(5s));
  CHECK(killed.done_at - kill_at < 1s);
  CHECK(killed.status == 200);
  CHECK(killed.written.find("data: {\"error\":") != std::string::npos);
  CHECK(killed.written.substr(killed.written.size() - 14) == "data: [DONE]\n\n");

  // Both dead: a 503 error body, before anything is written.
  Result none;
  StartSession(router, Request(n, true), none.Sink());
  REQUIRE(none.Wait(10s));
  CHECK(none.writes == 0);
  CHECK(none.status == 503);
  CHECK(Json::parse(none.body)["error"]["code"] == "no_engine_available");
}

TEST_CASE("an engine dies under a whole answer: retried on the other engine, same answer") {
  ServerProcess a(kModel);
  ServerProcess b(kModel);
  EngineRouter router({Address(a), Address(b)}, LoadExpectedModel(m3::test::DataPath(kModel), 0),
                      Options(3600s));
  REQUIRE(router.Start() == 2);

  // The reference: the same request answered whole with no fault (greedy: deterministic).
  const int n = 400;
  Result reference;
  StartSession(router, Request(n, false, {}, false), reference.Sink());
  REQUIRE(reference.Wait(120s));
  REQUIRE(reference.status == 200);
  const std::string want = Json::parse(reference.body)["choices"][0]["text"];

  // Its engine dies once tokens have come back.
  std::atomic<int> tokens{0};
  Result retried;
  Generation g = Request(n, false, {}, false);
  auto counting = std::make_shared<CountingObserver>(
      m3::api::MakeGenerationResponder(std::move(g.formatter), retried.Sink(), std::move(g.remake)),
      tokens);
  GenerationSession::Start(router, std::move(g.request), counting);
  REQUIRE(WaitFor([&] { return tokens.load() > 0 || retried.done; }, 60s));
  REQUIRE_FALSE(retried.done);  // still running on its first engine, which dies now
  const size_t first = router.endpoints()[0]->outstanding() == 1 ? 0 : 1;
  REQUIRE(router.endpoints()[first]->outstanding() == 1);
  (first == 0 ? a : b).Stop(SIGKILL);
  REQUIRE(retried.Wait(120s));
  CHECK_MESSAGE(retried.status == 200, retried.body);
  CHECK(counting->restarts == 1);
  CHECK(retried.writes == 0);
  if (retried.status == 200) {
    const Json body = Json::parse(retried.body);
    CHECK(body["choices"][0]["text"] == want);  // the answer from its start, not a tail
    CHECK(body["usage"]["completion_tokens"] == n);
  }
  // The dead engine is ejected at once (no probe ran): new requests go to the other one.
  CHECK(router.endpoints()[first]->state() == EndpointState::kUnhealthy);
}

TEST_CASE("a stream is retried before its first token, not after; the attempt bound") {
  ServerProcess a(kModel);
  ServerProcess b(kModel);
  const Json c = TextCase();
  const int n = static_cast<int>(c["completion_ids"].size());
  const std::string want = c["completion_text"];

  SUBCASE("before the first token: retried, the whole answer streamed from B") {
    EngineRouter router({Address(a), Address(b)}, LoadExpectedModel(m3::test::DataPath(kModel), 0),
                        Options(3600s));
    REQUIRE(router.Start() == 2);
    a.Stop(SIGKILL);  // the router still thinks A healthy: the stream's first attempt fails
    Result streamed;
    StartSession(router, Request(n, true), streamed.Sink());
    REQUIRE(streamed.Wait(60s));
    CHECK(streamed.status == 200);
    CHECK(streamed.written.find("\"error\"") == std::string::npos);
    CHECK(SseText(streamed.written) == want);
    CHECK(streamed.written.substr(streamed.written.size() - 14) == "data: [DONE]\n\n");
  }
  SUBCASE("after the first token: not retried, an error event and [DONE]") {
    EngineRouter router({Address(a), Address(b)}, LoadExpectedModel(m3::test::DataPath(kModel), 0),
                        Options(3600s));
    REQUIRE(router.Start() == 2);
    std::atomic<int> tokens{0};
    Result cut;
    Generation g = Request(3000, true);
    auto counting = std::make_shared<CountingObserver>(
        m3::api::MakeGenerationResponder(std::move(g.formatter), cut.Sink(), std::move(g.remake)),
        tokens);
    GenerationSession::Start(router, std::move(g.request), counting);
    REQUIRE(cut.WaitWrites(1, 60s));
    a.Stop(SIGKILL);
    REQUIRE(cut.Wait(5s));
    CHECK(counting->restarts == 1);  // asked, and refused: the client has part of the answer
    CHECK(cut.status == 200);
    CHECK(cut.written.find("data: {\"error\":") != std::string::npos);
    CHECK(cut.written.substr(cut.written.size() - 14) == "data: [DONE]\n\n");
  }
  SUBCASE("the bound: no retry with max_retries 0") {
    RouterOptions o = Options(3600s);
    o.max_retries = 0;
    EngineRouter router({Address(a), Address(b)}, LoadExpectedModel(m3::test::DataPath(kModel), 0),
                        o);
    REQUIRE(router.Start() == 2);
    a.Stop(SIGKILL);
    Result lost;
    StartSession(router, Request(n, false), lost.Sink());
    REQUIRE(lost.Wait(60s));
    CHECK(lost.status == 503);
    CHECK(router.endpoints()[0]->state() == EndpointState::kUnhealthy);
    // The next request is not sent to A: B answers it.
    Result next;
    StartSession(router, Request(n, false), next.Sink());
    REQUIRE(next.Wait(60s));
    CHECK(next.status == 200);
  }
  SUBCASE("a negative bound is refused") {
    RouterOptions o = Options(3600s);
    o.max_retries = -1;
    CHECK_THROWS_WITH(
        EngineRouter({Address(a)}, LoadExpectedModel(m3::test::DataPath(kModel), 0), o),
        doctest::Contains("--engine-retries"));
  }
}

TEST_CASE("the registry ends running generations: a stream gets an error event and [DONE]") {
  ServerProcess a(kModel);
  EngineRouter router({Address(a)}, LoadExpectedModel(m3::test::DataPath(kModel), 0),
                      Options(3600s));
  REQUIRE(router.Start() == 1);
  Result streamed, whole;
  StartSession(router, Request(3000, true), streamed.Sink());
  StartSession(router, Request(3000, false), whole.Sink());
  REQUIRE(streamed.WaitWrites(1, 60s));
  CHECK(router.generations().size() == 2);
  CHECK(router.generations().AbortAll("shutting down") == 2);
  REQUIRE(streamed.Wait(5s));
  REQUIRE(whole.Wait(5s));
  CHECK(streamed.status == 200);
  CHECK(streamed.written.find("\"code\":\"server_shutting_down\"") != std::string::npos);
  CHECK(streamed.written.substr(streamed.written.size() - 14) == "data: [DONE]\n\n");
  CHECK(whole.status == 503);
  CHECK(router.generations().size() == 0);
  CHECK(router.generations().AbortAll("again") == 0);
}
