// An HttpExchange over the HTTP server's whole-response Responder, for servers without
// streaming: a streamed response is gathered (bounded) and sent whole when it ends, and a
// client that leaves is noticed only when the answer is written. A stopgap until the server
// takes ExchangeHandlers itself.
#pragma once

#include <cstddef>
#include <memory>

#include "gateway/net/http_exchange.h"
#include "gateway/net/http_server.h"

namespace m3::api {

// Streams over `max_stream_bytes` fail their Write (the session then cancels).
net::HttpHandler AdaptExchangeHandler(net::ExchangeHandler handler,
                                      size_t max_stream_bytes = size_t{64} << 20);

}  // namespace m3::api
