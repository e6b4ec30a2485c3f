// The bridge from a generation's response (GenerationResponder) to the client's HttpExchange:
// the first SSE write opens the stream (200, text/event-stream), later ones are queued on it,
// the end closes it; a response that never streamed is sent whole (the completion or its
// error, with its status).
// A client that leaves, or stops reading while its queue is full, cancels the session, which
// aborts the engine request.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "gateway/api/generation_responder.h"
#include "gateway/engine_client/generation_session.h"
#include "gateway/net/http_exchange.h"

namespace m3::api {

// The sessions a sink cancels (one per choice), known only once GenerationSession::Start
// returns (the sink may be called before that).
class SessionHandle {
 public:
  // Adds a session (cancelled at once when Cancel came first).
  void Set(std::shared_ptr<engine_client::GenerationSession> session);
  void Cancel();
  void Clear();  // the response finished: drop the references (they hold the sink, which holds us)

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<engine_client::GenerationSession>> sessions_;
  bool cancel_ = false;
};

// `keep`: what must live until the response is done (the request's media, its admission).
ResponseSink MakeExchangeSink(std::shared_ptr<net::HttpExchange> exchange,
                              std::shared_ptr<SessionHandle> handle, std::shared_ptr<void> keep);

}  // namespace m3::api
