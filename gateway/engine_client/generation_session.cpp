// One completion on the engines (see generation_session.h).
#include "gateway/engine_client/generation_session.h"

#include <optional>
#include <random>
#include <string>
#include <utility>

#include "gateway/engine_client/engine_response.h"
#include "shared/error.h"

namespace m3::engine_client {

namespace v1 = engine::v1;

namespace {

// What an engine's refusal means for the request.
GenerationErrorKind KindOfGrpc(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return GenerationErrorKind::kInvalidRequest;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return GenerationErrorKind::kBusy;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return GenerationErrorKind::kTimeout;
    case grpc::StatusCode::UNAVAILABLE:
      return GenerationErrorKind::kNoEngine;
    default:
      return GenerationErrorKind::kEngineFailure;  // not the client's doing
  }
}

// The engine is gone or cannot be reached (its process died: "Socket closed", a connection
// reset or refused): another engine can answer the same request. Every other status is the
// request's own (invalid, timed out, cancelled) or the engine's considered answer.
bool EngineGone(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE;
}

}  // namespace

GenerationSession::GenerationSession(EngineRouter& router, GenerationRequest request,
                                     std::shared_ptr<GenerationObserver> observer)
    : router_(router), request_(std::move(request)), observer_(std::move(observer)) {
  Require(observer_ != nullptr, ErrorCode::kInternal, "a session needs an observer");
}

std::shared_ptr<GenerationSession> GenerationSession::Start(
    EngineRouter& router, GenerationRequest request, std::shared_ptr<GenerationObserver> observer) {
  if (!request.request.sampling().has_seed()) {
    // The seed is fixed here, not left to the engine, so that an attempt on another engine
    // samples what the first one would have.
    static thread_local std::mt19937_64 draw{std::random_device{}()};
    request.request.mutable_sampling()->set_seed(draw());
  }
  std::shared_ptr<GenerationSession> s(
      new GenerationSession(router, std::move(request), std::move(observer)));
  s->self_ = s;
  router.generations().Add(s);
  s->Attempt();
  return s;
}

void GenerationSession::Attempt() {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_) return;
  std::shared_ptr<EngineEndpoint> engine;
  try {
    const auto& ids = request_.request.token_ids();
    if (attempts_ == 0 && request_.preferred && request_.preferred->healthy()) {
      engine = request_.preferred;
    } else {
      engine = router_.Pick(tried_,
                            std::span<const int32_t>(ids.data(), static_cast<size_t>(ids.size())));
    }
  } catch (const Error& e) {
    Fail(lock, {e.code() == ErrorCode::kUnavailable ? GenerationErrorKind::kNoEngine
                                                    : GenerationErrorKind::kEngineFailure,
                e.what()});
    return;
  }
  tried_.push_back(engine.get());
  ++attempts_;
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
  completion_tokens_ += r.token_ids_size();
  const std::span<const int32_t> ids(r.token_ids().data(), static_cast<size_t>(r.token_ids_size()));
  std::vector<openai::TokenLogprob> logprobs;
  try {
    logprobs = TokenLogprobs(r, request_.top_logprobs);
  } catch (const Error& e) {
    return FailAndCancel(lock, {GenerationErrorKind::kEngineFailure, e.what()});
  }
  bool output_complete = false;
  std::optional<std::string> undecodable;
  {
    // Observer calls are ordered while mu_ is released: the observer's write to a client may
    // find it gone, and its disconnect calls Cancel.
    std::lock_guard<std::mutex> observer_lock(observer_mu_);
    lock.unlock();
    try {
      output_complete = observer_->OnTokens(ids, logprobs);
    } catch (const Error& e) {
      // E.g. an id the tokenizer does not have (a padded vocabulary row): this runs on a gRPC
      // thread, where an escaping exception would end the process.
      undecodable = e.what();
    }
  }
  lock.lock();
  if (finished_) return;
  if (undecodable) {
    return FailAndCancel(lock, {GenerationErrorKind::kEngineFailure,
                                "the engine's output could not be decoded: " + *undecodable});
  }
  if (auto reason = FinishReasonOf(r)) {
    Complete(lock, *reason, UsageOf(r));
    return;
  }
  if (output_complete) {
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
    {
      std::lock_guard<std::mutex> observer_lock(observer_mu_);
      observer_->OnCancelled();
    }
    lock.lock();
    Release(lock);
    return;
  }
  if (status.ok()) {
    // The stream ended without a final message: treat it as the engine's failure.
    Fail(lock, {GenerationErrorKind::kEngineFailure,
                "the engine ended the stream without finishing the request"});
    return;
  }
  if (EngineGone(status) && attempts_ <= router_.max_retries()) {
    // Another engine can take the request from the start, if nothing has reached the client
    // yet (the observer then forgets the tokens it was given).
    bool restart;
    {
      std::lock_guard<std::mutex> observer_lock(observer_mu_);
      restart = observer_->Restart();
    }
    if (restart) {
      completion_tokens_ = 0;
      call_.reset();
      lock.unlock();
      Attempt();
      return;
    }
  }
  Fail(lock, {KindOfGrpc(status.error_code()), "engine: " + status.error_message()});
}

void GenerationSession::Cancel() {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_ || cancelled_) return;
  cancelled_ = true;
  auto call = call_;
  lock.unlock();
  if (call) call->Cancel();
}

bool GenerationSession::Abort(GenerationError error) {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_) return false;
  FailAndCancel(lock, std::move(error));
  return true;
}

void GenerationSession::Release(std::unique_lock<std::mutex>&) {
  router_.generations().Remove(this);
  // Whoever called us holds a reference (a call's callback, Start, the registry's Abort): the
  // session is not destroyed under its own lock.
  self_.reset();
}

void GenerationSession::Complete(std::unique_lock<std::mutex>& lock, text::FinishReason reason,
                                 const openai::Usage& usage) {
  finished_ = true;
  {
    std::lock_guard<std::mutex> observer_lock(observer_mu_);
    lock.unlock();
    observer_->OnFinish(reason, usage);
  }
  lock.lock();
  Release(lock);
}

void GenerationSession::Fail(std::unique_lock<std::mutex>& lock, GenerationError error) {
  finished_ = true;
  {
    std::lock_guard<std::mutex> observer_lock(observer_mu_);
    lock.unlock();
    observer_->OnError(error);
  }
  lock.lock();
  Release(lock);
}

void GenerationSession::FailAndCancel(std::unique_lock<std::mutex>& lock, GenerationError error) {
  auto call = call_;
  Fail(lock, std::move(error));
  lock.unlock();
  if (call) call->Cancel();
}

}  // namespace m3::engine_client
