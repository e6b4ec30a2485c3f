// One completion on the engines (see generation_session.h).
#include "gateway/engine_client/generation_session.h"

#include <utility>

#include "gateway/engine_client/engine_response.h"
#include "gateway/openai/request_error.h"
#include "gateway/openai/sse.h"

namespace m3::engine_client {

namespace v1 = engine::v1;

namespace {

// How an engine's refusal reads to the client.
int HttpStatusOfGrpc(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return 400;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    default:
      return 502;  // the engine failed in a way that is not the client's doing
  }
}

std::string CodeOf(int status) {
  switch (status) {
    case 400:
      return "invalid_request";
    case 429:
      return "engine_busy";
    case 503:
      return "no_engine_available";
    case 504:
      return "engine_timeout";
    default:
      return "engine_error";
  }
}

}  // namespace

GenerationSession::GenerationSession(EngineRouter& router, GenerationRequest request,
                                     GenerationSink sink)
    : router_(router), request_(std::move(request)), sink_(std::move(sink)) {
  Require(request_.formatter != nullptr, ErrorCode::kInternal, "a session needs a formatter");
}

std::shared_ptr<GenerationSession> GenerationSession::Start(EngineRouter& router,
                                                            GenerationRequest request,
                                                            GenerationSink sink) {
  std::shared_ptr<GenerationSession> s(
      new GenerationSession(router, std::move(request), std::move(sink)));
  s->self_ = s;
  s->Attempt();
  return s;
}

void GenerationSession::Attempt() {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_) return;
  std::shared_ptr<EngineEndpoint> engine;
  try {
    const auto& ids = request_.request.token_ids();
    engine =
        router_.Pick(tried_, std::span<const int32_t>(ids.data(), static_cast<size_t>(ids.size())));
  } catch (const openai::RequestError& e) {
    Fail(lock, e.http_status(), e.what(), e.error_code());
    return;
  }
  tried_.push_back(engine.get());
  // The call's callbacks hold the session: it lives until the call is done.
  auto self = shared_from_this();
  lock.unlock();
  auto call = engine->Generate(
      request_.request, {[self](v1::GenerateResponse&& r) { self->OnResponse(std::move(r)); },
                         [self](const grpc::Status& status) { self->OnDone(status); }});
  lock.lock();
  call_ = call;
  const bool cancel = cancelled_ || finished_;
  lock.unlock();
  if (cancel) call->Cancel();
}

void GenerationSession::OnResponse(v1::GenerateResponse&& r) {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_) return;
  got_response_ = true;
  completion_tokens_ += r.token_ids_size();
  const std::span<const int32_t> ids(r.token_ids().data(), static_cast<size_t>(r.token_ids_size()));
  std::vector<openai::TokenLogprob> logprobs;
  try {
    logprobs = TokenLogprobs(r, request_.top_logprobs);
  } catch (const Error& e) {
    auto call = call_;
    Fail(lock, 502, e.what(), "engine_error");
    lock.unlock();  // the call may end (and call back into us) on cancellation
    if (call) call->Cancel();
    return;
  }
  bool output_finished;
  std::vector<std::string> events;
  try {
    openai::ResponseFormatter& f = *request_.formatter;
    if (f.streaming() && !started_writing_) events = f.Start();
    for (auto& e : f.Push(ids, logprobs)) events.push_back(std::move(e));
    output_finished = f.output_finished();
  } catch (const Error& e) {
    // E.g. an id the tokenizer does not have (a padded vocabulary row): this runs on a gRPC
    // thread, where an escaping exception would end the process.
    auto call = call_;
    Fail(lock, 502, std::string("the engine's output could not be decoded: ") + e.what(),
         "engine_error");
    lock.unlock();  // the call may end (and call back into us) on cancellation
    if (call) call->Cancel();
    return;
  }
  if (request_.formatter->streaming()) {
    Write(lock, std::move(events));
    lock.lock();
    if (finished_) return;
  }
  if (auto reason = FinishReasonOf(r)) {
    Complete(lock, *reason, UsageOf(r));
    return;
  }
  if (output_finished) {
    // A stop string ended the output: the engine's further tokens are not needed.
    const openai::Usage usage{static_cast<int64_t>(request_.request.token_ids_size()),
                              completion_tokens_, 0};
    auto call = call_;
    Complete(lock, text::FinishReason::kStop, usage);
    lock.unlock();  // the call may end (and call back into us) on cancellation
    if (call) call->Cancel();
  }
}

void GenerationSession::OnDone(const grpc::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_) return;
  if (cancelled_) {
    finished_ = true;
    lock.unlock();
    std::lock_guard<std::mutex> sink_lock(sink_mu_);
    if (sink_.finish) sink_.finish(499, "");
    self_.reset();
    return;
  }
  if (status.ok()) {
    // The stream ended without a final message: treat it as the engine's failure.
    Fail(lock, 502, "the engine ended the stream without finishing the request", "engine_error");
    return;
  }
  if (!got_response_ && status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    // Nothing was produced: another engine can take the request from the start.
    lock.unlock();
    Attempt();
    return;
  }
  const int http = HttpStatusOfGrpc(status.error_code());
  Fail(lock, http, "engine: " + status.error_message(), CodeOf(http));
}

void GenerationSession::Cancel() {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_ || cancelled_) return;
  cancelled_ = true;
  auto call = call_;
  lock.unlock();
  if (call) call->Cancel();
}

void GenerationSession::Write(std::unique_lock<std::mutex>& lock, std::vector<std::string> events) {
  if (events.empty()) {
    lock.unlock();
    return;
  }
  started_writing_ = true;
  std::string text;
  for (auto& e : events) text += e;
  // Order sink calls while not holding mu_ (the sink may block on the client's socket).
  std::lock_guard<std::mutex> sink_lock(sink_mu_);
  lock.unlock();
  if (sink_.write) sink_.write(std::move(text));
}

void GenerationSession::Complete(std::unique_lock<std::mutex>& lock, text::FinishReason reason,
                                 const openai::Usage& usage) {
  finished_ = true;
  std::string body;
  openai::ResponseFormatter& f = *request_.formatter;
  if (f.streaming()) {
    std::vector<std::string> events;
    if (!started_writing_) events = f.Start();
    for (auto& e : f.Finish(reason, usage)) events.push_back(std::move(e));
    Write(lock, std::move(events));
  } else {
    std::vector<std::string> out = f.Finish(reason, usage);
    if (!out.empty()) body = std::move(out[0]);
    lock.unlock();
  }
  {
    std::lock_guard<std::mutex> sink_lock(sink_mu_);
    if (sink_.finish) sink_.finish(200, std::move(body));
  }
  lock.lock();
  // Released after the call is done with us (its callbacks hold their own reference).
  self_.reset();
}

void GenerationSession::Fail(std::unique_lock<std::mutex>& lock, int http_status,
                             const std::string& message, const std::string& code) {
  finished_ = true;
  const nlohmann::json error = openai::ErrorBody(http_status, message, std::nullopt, code);
  if (request_.formatter->streaming() && started_writing_) {
    Write(lock, {openai::SseError(error), openai::SseDone()});
    std::lock_guard<std::mutex> sink_lock(sink_mu_);
    if (sink_.finish) sink_.finish(200, "");
  } else {
    lock.unlock();
    std::lock_guard<std::mutex> sink_lock(sink_mu_);
    if (sink_.finish) sink_.finish(http_status, error.dump());
  }
  lock.lock();
  self_.reset();
}

}  // namespace m3::engine_client
