// HttpExchange: one request's way back to its client, for handlers that answer later, from any
// thread, and possibly in pieces. A handler either sends one whole response (Respond) or a
// streamed one (StartStream, Write..., EndStream: a chunked body, e.g. server-sent events). The
// exchange also tells the handler when the client goes away before the response is done, so
// work on its behalf (an engine request) can be cancelled at once instead of when a write
// fails. Writes are queued without blocking; the queue is bounded, and a client that stops
// reading while its queue is full is disconnected rather than buffered without limit.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/beast/http.hpp>

namespace m3::net {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  // The whole response. Exactly one of Respond / StartStream per exchange; later calls (and
  // calls after the client left) are ignored. Thread-safe, like every method here.
  virtual void Respond(HttpResponse response) = 0;

  // Sends the status line and headers of `head` (its body is ignored; the body follows with
  // chunked transfer encoding) and returns at once. For a HEAD request the head is the whole
  // response: the stream ends there and Write returns false.
  virtual void StartStream(HttpResponse head) = 0;
  // Queues `data` as the next chunk of a started stream. Returns false when the client has
  // gone, the stream has ended, or the queued bytes would pass the server's bound (the
  // connection is then closed and the disconnect callback runs).
  virtual bool Write(std::string data) = 0;
  // Ends a started stream (the last chunk); the connection then serves its next request.
  virtual void EndStream() = 0;

  // `callback` runs once, on a network thread, when the client disconnects (or the
  // connection is closed for it) before the response has been fully sent. If that already
  // happened it runs at once, on the calling thread. Set it at most once.
  virtual void OnDisconnect(std::function<void()> callback) = 0;

  // Whether the client is still there (no disconnect seen yet).
  virtual bool connected() const = 0;
};

// Handlers answering through an exchange; the request's headers and body are complete.
using ExchangeHandler =
    std::function<void(HttpRequest&& request, std::shared_ptr<HttpExchange> exchange)>;

}  // namespace m3::net
