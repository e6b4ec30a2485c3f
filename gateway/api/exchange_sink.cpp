// A generation's response -> HttpExchange (see exchange_sink.h).
#include "gateway/api/exchange_sink.h"

#include <atomic>

#include "gateway/api/error_response.h"

namespace m3::api {

namespace http = boost::beast::http;

void SessionHandle::Set(std::shared_ptr<engine_client::GenerationSession> session) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!session) return;
  sessions_.push_back(session);
  const bool cancel = cancel_;
  lock.unlock();
  if (cancel) session->Cancel();
}

void SessionHandle::Cancel() {
  std::unique_lock<std::mutex> lock(mu_);
  cancel_ = true;
  auto sessions = sessions_;
  lock.unlock();
  for (auto& s : sessions) s->Cancel();
}

void SessionHandle::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.clear();
}

ResponseSink MakeExchangeSink(std::shared_ptr<net::HttpExchange> exchange,
                              std::shared_ptr<SessionHandle> handle, std::shared_ptr<void> keep) {
  // Sink calls are ordered by the session; `streaming` is only touched from them.
  auto streaming = std::make_shared<bool>(false);
  ResponseSink sink;
  sink.write = [exchange, handle, streaming](std::string events) {
    if (!*streaming) {
      *streaming = true;
      net::HttpResponse head{http::status::ok, 11};
      head.set(http::field::content_type, "text/event-stream; charset=utf-8");
      head.set(http::field::cache_control, "no-cache");
      exchange->StartStream(std::move(head));
    }
    if (!exchange->Write(std::move(events))) handle->Cancel();
  };
  sink.finish = [exchange, handle, streaming, keep](int status, std::string body) mutable {
    // The admission slot and the media hold go before the last bytes: a client that sends its
    // next request as soon as this one ends must find the slot free.
    keep.reset();
    if (*streaming) {
      exchange->EndStream();
    } else if (status != 499) {  // 499: the client is gone, nothing to send
      exchange->Respond(JsonBodyResponse(status, std::move(body)));
    }
    handle->Clear();
  };
  return sink;
}

}  // namespace m3::api
