// POST /v1/completions (see completion_handler.h).
#include "gateway/api/completion_handler.h"

#include <utility>

#include "gateway/api/client_gone.h"
#include "gateway/api/error_response.h"
#include "gateway/api/generation_launch.h"
#include "gateway/api/prompt_limit.h"
#include "gateway/openai/completion_request.h"
#include "gateway/openai/output_options.h"
#include "gateway/openai/request_body.h"
#include "gateway/openai/request_error.h"

namespace m3::api {
namespace {

using Clock = std::chrono::steady_clock;

void Run(const ServingContext& ctx, const std::string& body,
         const std::shared_ptr<net::HttpExchange>& exchange, Clock::time_point arrival,
         std::shared_ptr<void> admission) {
  try {
    const openai::CompletionRequest req = openai::ParseCompletionRequest(
        openai::ParseRequestBody(body, ctx.options().limits, ClientGone(exchange)),
        ctx.served_model(), ctx.options().limits, ctx.vocab_size());
    GenerationJob job;
    job.prompt_ids = req.prompt_is_ids
                         ? req.prompt_ids
                         : ctx.tokenizer().Encode(req.prompt, true, GenerationMaxIds(ctx));
    if (job.prompt_ids.size() > GenerationMaxIds(ctx)) ThrowPromptOverContext(ctx, "prompt");
    if (job.prompt_ids.empty()) {
      throw openai::RequestError(ErrorCode::kInvalidArgument, "the prompt is empty", "prompt",
                                 "invalid_value");
    }
    job.request_id = ctx.NewId("cmpl-");
    job.make_formatter = [&ctx,
                          identity = openai::ResponseIdentity{job.request_id, ServingContext::Now(),
                                                              ctx.model_name()},
                          options = openai::CompletionOutputOptions(req, ctx.eos_token_ids()),
                          stream = req.stream, logprobs = req.sampling.logprobs] {
      return openai::MakeCompletionFormatter(ctx.tokenizer(), identity, options, stream.stream,
                                             stream.include_usage, logprobs);
    };
    job.sampling = req.sampling;
    job.prompt_param = "prompt";
    job.arrival = arrival;
    job.admission = std::move(admission);
    LaunchGeneration(ctx, exchange, std::move(job));
  } catch (...) {
    exchange->Respond(ErrorResponseFor(std::current_exception()));
  }
}

}  // namespace

void HandleCompletion(const ServingContext& ctx, net::HttpRequest&& request,
                      std::shared_ptr<net::HttpExchange> exchange, Clock::time_point arrival) {
  AdmitAndDispatch(ctx, std::move(request), std::move(exchange), arrival, &Run);
}

}  // namespace m3::api
