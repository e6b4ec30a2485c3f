// The first and last steps of a chat or text completion request, shared by both handlers:
// admission and dispatch to the worker pool; then the completion budget resolved against the
// context, the GenerateRequest built for the engine (pixels in the dtype the engine prefers),
// and a GenerationSession started whose events a GenerationResponder answers through the
// exchange (client disconnect cancels it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gateway/api/error_response.h"
#include "gateway/api/media_stage.h"
#include "gateway/api/serving_context.h"
#include "gateway/net/http_exchange.h"
#include "gateway/openai/response_formatter.h"
#include "gateway/openai/sampling_request.h"

namespace m3::api {

struct GenerationJob {
  std::string request_id;
  std::vector<int32_t> prompt_ids;
  std::shared_ptr<PreparedMedia> media;  // may be null
  openai::SamplingRequest sampling;
  // The response formatter, made again for a retry on another engine (generation_responder.h).
  std::function<std::unique_ptr<openai::ResponseFormatter>()> make_formatter;
  std::chrono::steady_clock::time_point arrival;
  std::shared_ptr<void> admission;  // released when the response is done
  // The body field a context-length error names ("prompt" on /v1/completions).
  std::string prompt_param = "messages";
};

// The first step of a chat or text completion request: admission (429 when too many are in
// flight) and the body handed to the worker pool (429 when its queue is full). `run` then works
// on the body there, holding the admission until the response is done.
using GenerationRun = void (*)(const ServingContext& ctx, const std::string& body,
                               const std::shared_ptr<net::HttpExchange>& exchange,
                               std::chrono::steady_clock::time_point arrival,
                               std::shared_ptr<void> admission);
// The refusals are worded in `style`.
void AdmitAndDispatch(const ServingContext& ctx, net::HttpRequest&& request,
                      std::shared_ptr<net::HttpExchange> exchange,
                      std::chrono::steady_clock::time_point arrival, GenerationRun run,
                      ErrorStyle style = ErrorStyle::kOpenAi);

// Throws RequestError (context length, 503 when no engine is healthy) before anything is sent.
void LaunchGeneration(const ServingContext& ctx, std::shared_ptr<net::HttpExchange> exchange,
                      GenerationJob job);

}  // namespace m3::api
