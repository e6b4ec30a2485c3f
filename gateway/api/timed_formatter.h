// A ResponseFormatter that times the tokens passing through it (time to first token from the
// request's arrival, and the gap between tokens) for the metrics, then hands them to the real
// formatter. Sitting at the formatter, it sees every engine response of both streamed and
// whole answers.
#pragma once

#include <chrono>
#include <memory>

#include "gateway/api/api_metrics.h"
#include "gateway/openai/response_formatter.h"

namespace m3::api {

std::unique_ptr<openai::ResponseFormatter> MakeTimedFormatter(
    std::unique_ptr<openai::ResponseFormatter> inner, ApiMetrics& metrics,
    std::chrono::steady_clock::time_point arrival);

}  // namespace m3::api
