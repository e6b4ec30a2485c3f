// GenerationSession: one completion's generation on the engines (chat or text completion), as
// a stream of events for the API layer: picks an engine, retries on another one when the
// engine is gone (UNAVAILABLE: the connection failed or was closed) while nothing has reached
// the client (the observer agrees to Restart), up to the router's max_retries more attempts,
// with the same sampling seed (drawn here when the client gave none) so that the retry answers
// what the first engine would have; hands each response's tokens to its GenerationObserver,
// cancels the engine request when the observer says the output is complete (a stop string) or
// the caller cancels (the client went away) or the router's registry aborts it (the shutdown
// grace period is over), and reports the end: the engine's finish reason and usage, or a
// GenerationError whose kind says what failed. Nothing here knows HTTP or SSE: gateway/api
// words the events for the client.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "engine.pb.h"
#include "gateway/engine_client/engine_router.h"
#include "gateway/engine_client/generation_observer.h"

namespace m3::engine_client {

struct GenerationRequest {
  engine::v1::GenerateRequest request;  // BuildGenerateRequest's
  int top_logprobs = 0;                 // as asked of the engine (request.sampling.logprobs)
  // The engine the first attempt goes to while it is healthy (the choices of an n > 1 request
  // share one engine's prefix cache); null: the router's policy picks.
  std::shared_ptr<EngineEndpoint> preferred;
};

class GenerationSession : public std::enable_shared_from_this<GenerationSession> {
 public:
  // `router` must outlive the session; the session keeps itself alive until the observer has
  // been told the end. The observer is called on gRPC threads, or from Start itself when no
  // engine can take the request (OnError with kNoEngine).
  static std::shared_ptr<GenerationSession> Start(EngineRouter& router, GenerationRequest request,
                                                  std::shared_ptr<GenerationObserver> observer);

  // The client went away: the engine request is cancelled; OnCancelled is the end.
  void Cancel();
  // Ends the generation now with `error` (OnError) and cancels the engine request; false when
  // it had already ended.
  bool Abort(GenerationError error);

 private:
  GenerationSession(EngineRouter& router, GenerationRequest request,
                    std::shared_ptr<GenerationObserver> observer);
  void Attempt();
  void OnResponse(engine::v1::GenerateResponse&& response);
  void OnDone(const grpc::Status& status);
  // The end of the generation; `lock` is released before the observer is called.
  void Complete(std::unique_lock<std::mutex>& lock, text::FinishReason reason,
                const openai::Usage& usage);
  void Fail(std::unique_lock<std::mutex>& lock, GenerationError error);
  // Fail, then cancel the engine request (the call may end, and call back, on cancellation).
  void FailAndCancel(std::unique_lock<std::mutex>& lock, GenerationError error);
  // The observer has been told the end: the registry and the self-reference let go (under
  // `lock`, which stays held).
  void Release(std::unique_lock<std::mutex>& lock);

  EngineRouter& router_;
  GenerationRequest request_;
  std::shared_ptr<GenerationObserver> observer_;

  std::mutex mu_;
  std::mutex observer_mu_;  // keeps observer calls in order once mu_ is released
  std::shared_ptr<GenerationSession> self_;
  std::shared_ptr<GenerateCall> call_;
  std::vector<const EngineEndpoint*> tried_;
  int attempts_ = 0;
  bool finished_ = false;  // the observer has been (or is being) told the end
  bool cancelled_ = false;
  int64_t completion_tokens_ = 0;
};

}  // namespace m3::engine_client
