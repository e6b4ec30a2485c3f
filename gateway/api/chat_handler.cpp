// POST /v1/chat/completions (see chat_handler.h).
#include "gateway/api/chat_handler.h"

#include <utility>

#include "gateway/api/chat_prompt.h"
#include "gateway/api/error_response.h"
#include "gateway/api/generation_launch.h"
#include "gateway/openai/output_options.h"
#include "gateway/openai/request_body.h"

namespace m3::api {
namespace {

using Clock = std::chrono::steady_clock;

void Generate(const ServingContext& ctx, const std::shared_ptr<net::HttpExchange>& exchange,
              ChatPrompt& p, Clock::time_point arrival, std::shared_ptr<void> admission) {
  const openai::ChatRequest& req = p.request;
  GenerationJob job;
  job.request_id = ctx.NewId("chatcmpl-");
  job.formatter = openai::MakeChatFormatter(
      ctx.tokenizer(), {job.request_id, ServingContext::Now(), ctx.model_name()},
      openai::ChatOutputOptions(req, ctx.eos_token_ids(), p.prompt.rendered, ctx.chat_format()),
      req.stream.stream, req.stream.include_usage, req.sampling.logprobs);
  job.prompt_ids = std::move(p.prompt.ids);
  job.media = std::move(p.media);
  job.sampling = req.sampling;
  job.arrival = arrival;
  job.admission = std::move(admission);
  LaunchGeneration(ctx, exchange, std::move(job));
}

void Run(const ServingContext& ctx, const std::string& body,
         const std::shared_ptr<net::HttpExchange>& exchange, Clock::time_point arrival,
         std::shared_ptr<void> admission) {
  try {
    const openai::ServedModel model = ctx.served_model();
    openai::ChatRequest req = openai::ParseChatRequest(
        openai::ParseRequestBody(body, ctx.options().limits), model, ctx.options().limits);
    const bool inline_ok = body.size() <= ServingContext::kInlineBodyBytes;
    StartChatPrompt(
        ctx, std::move(req), inline_ok,
        [&ctx, exchange, arrival, admission](std::shared_ptr<ChatPrompt> p,
                                             std::exception_ptr error) {
          try {
            if (error) std::rethrow_exception(error);
            Generate(ctx, exchange, *p, arrival, admission);
          } catch (...) {
            exchange->Respond(ErrorResponseFor(std::current_exception()));
          }
        },
        [exchange] { return !exchange->connected(); });
  } catch (...) {
    exchange->Respond(ErrorResponseFor(std::current_exception()));
  }
}

}  // namespace

void HandleChatCompletion(const ServingContext& ctx, net::HttpRequest&& request,
                          std::shared_ptr<net::HttpExchange> exchange, Clock::time_point arrival) {
  AdmitAndDispatch(ctx, std::move(request), std::move(exchange), arrival, &Run);
}

}  // namespace m3::api
