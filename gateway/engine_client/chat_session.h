// ChatSession: one chat completion's generation on the engines, between the HTTP handler and
// the engine client: picks an engine, retries on another one while no token has been
// produced (an engine that died before it was ejected), feeds the streamed tokens to the
// response builders (SSE chunks or the whole chat.completion body), cancels the engine
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
#include "gateway/openai/chat_completion.h"
#include "gateway/openai/chat_stream.h"

namespace m3::engine_client {

struct ChatSessionRequest {
  engine::v1::GenerateRequest request;  // BuildGenerateRequest's
  openai::ResponseIdentity identity;
  text::OutputParserOptions output;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;
};

struct ChatSessionSink {
  // Streaming only: SSE text, in order. The first call means a 200 with an event stream.
  std::function<void(std::string events)> write;
  // Exactly once, last. Streaming: status 200 and an empty body after the final write, or an
  // error status and OpenAI error body when nothing was written. Non-streaming: the status and
  // the chat.completion or error body.
  std::function<void(int http_status, std::string body)> finish;
};

class ChatSession : public std::enable_shared_from_this<ChatSession> {
 public:
  // `router` and `tokenizer` must outlive the session; the session keeps itself alive until
  // finish has been called.
  static std::shared_ptr<ChatSession> Start(EngineRouter& router, const tok::Tokenizer& tokenizer,
                                            ChatSessionRequest request, ChatSessionSink sink);

  // The client went away: the engine request is cancelled and finish is not called again
  // with anything the client could see (it is still called, once, with status 499).
  void Cancel();

 private:
  ChatSession(EngineRouter& router, const tok::Tokenizer& tokenizer, ChatSessionRequest request,
              ChatSessionSink sink);
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
  ChatSessionRequest request_;
  ChatSessionSink sink_;
  openai::ChatStream stream_;
  openai::ChatCompletion whole_;

  std::mutex mu_;
  std::mutex sink_mu_;  // keeps sink calls in order once mu_ is released
  std::shared_ptr<ChatSession> self_;
  std::shared_ptr<GenerateCall> call_;
  std::vector<const EngineEndpoint*> tried_;
  bool got_response_ = false;
  bool started_writing_ = false;
  bool finished_ = false;  // finish has been (or is being) called
  bool cancelled_ = false;
  int64_t completion_tokens_ = 0;
};

}  // namespace m3::engine_client
