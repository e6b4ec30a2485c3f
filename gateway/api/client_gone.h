// ClientGone: the cancellation signal a request's preparation checks at bounded intervals (the
// body's parse every MiB of text, the prompt before it is rendered): true once the client has
// left, so a large body stops costing CPU soon after its connection closes.
#pragma once

#include <functional>
#include <memory>

#include "gateway/net/http_exchange.h"

namespace m3::api {

// The exchange must outlive every call (the handler holds it while it works).
inline std::function<bool()> ClientGone(const net::HttpExchange& exchange) {
  return [e = &exchange] { return !e->connected(); };
}
inline std::function<bool()> ClientGone(const std::shared_ptr<net::HttpExchange>& exchange) {
  return ClientGone(*exchange);
}

}  // namespace m3::api
