// GenerationSession: one completion's generation on the engines (chat or text completion),
// between the HTTP handler and the engine client: picks an engine, retries on another one
// while no token has been produced (an engine that died before it was ejected), feeds the
// streamed tokens to the response formatter (SSE chunks or the whole body), cancels the engine
// request when the output ends on a stop string or the client goes away, and turns engine
// failures into OpenAI errors (an HTTP status before the first byte, an SSE error event
// after). Nothing is written before the engine's first response, so a request that fails
// early still gets a proper status line.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine.pb.h"
#include "gateway/engine_client/engine_router.h"
#include "gateway/openai/response_formatter.h"

namespace m3::engine_client {

struct GenerationRequest {
  engine::v1::GenerateRequest request;  // BuildGenerateRequest's
  int top_logprobs = 0;                 // as asked of the engine (request.sampling.logprobs)
  std::unique_ptr<openai::ResponseFormatter> formatter;
};

struct GenerationSink {
  // Streaming only: SSE text, in order. The first call means a 200 with an event stream.
  std::function<void(std::string events)> write;
  // Exactly once, last. Streaming: status 200 and an empty body after the final write, or an
  // error status and OpenAI error body when nothing was written. Non-streaming: the status and
  // the response or error body. 499 (nothing to send) after Cancel.
  std::function<void(int http_status, std::string body)> finish;
};

class GenerationSession : public std::enable_shared_from_this<GenerationSession> {
 public:
  // `router` must outlive the session; the session keeps itself alive until finish has been
  // called. The sink is called on gRPC threads, or from Start itself when no engine can take
  // the request (finish with 503).
  static std::shared_ptr<GenerationSession> Start(EngineRouter& router, GenerationRequest request,
                                                  GenerationSink sink);

  // The client went away: the engine request is cancelled; finish is called once with 499.
  void Cancel();

 private:
  GenerationSession(EngineRouter& router, GenerationRequest request, GenerationSink sink);
  void Attempt();
  void OnResponse(engine::v1::GenerateResponse&& response);
  void OnDone(const grpc::Status& status);
  // Emits the end of the response; `lock` is released before calling the sink.
  void Complete(std::unique_lock<std::mutex>& lock, text::FinishReason reason,
                const openai::Usage& usage);
  void Fail(std::unique_lock<std::mutex>& lock, int http_status, const std::string& message,
            const std::string& code);
  void Write(std::unique_lock<std::mutex>& lock, std::vector<std::string> events);

  EngineRouter& router_;
  GenerationRequest request_;
  GenerationSink sink_;

  std::mutex mu_;
  std::mutex sink_mu_;  // keeps sink calls in order once mu_ is released
  std::shared_ptr<GenerationSession> self_;
  std::shared_ptr<GenerateCall> call_;
  std::vector<const EngineEndpoint*> tried_;
  bool got_response_ = false;
  bool started_writing_ = false;
  bool finished_ = false;  // finish has been (or is being) called
  bool cancelled_ = false;
  int64_t completion_tokens_ = 0;
};

}  // namespace m3::engine_client
