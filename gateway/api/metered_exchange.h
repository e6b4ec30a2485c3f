// An HttpExchange decorator that counts the response in the metrics when it is done: its
// endpoint and status, and the time from the request's arrival to its last byte (for a
// stream, to its end). A request whose client left before an answer counts as 499.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "gateway/api/api_metrics.h"
#include "gateway/net/http_exchange.h"

namespace m3::api {

std::shared_ptr<net::HttpExchange> MakeMeteredExchange(
    std::shared_ptr<net::HttpExchange> inner, ApiMetrics& metrics, std::string endpoint,
    std::chrono::steady_clock::time_point arrival);

}  // namespace m3::api
