// POST /v1/chat/completions (see chat_handler.h).
#include "gateway/api/chat_handler.h"

#include <utility>

#include "gateway/api/chat_generation.h"
#include "gateway/api/client_gone.h"
#include "gateway/api/error_response.h"
#include "gateway/api/generation_launch.h"
#include "gateway/openai/output_options.h"
#include "gateway/openai/request_body.h"

namespace m3::api {
namespace {

using Clock = std::chrono::steady_clock;

void Run(const ServingContext& ctx, const std::string& body,
         const std::shared_ptr<net::HttpExchange>& exchange, Clock::time_point arrival,
         std::shared_ptr<void> admission) {
  try {
    openai::ChatRequest req = openai::ParseChatRequest(
        openai::ParseRequestBody(body, ctx.options().limits, ClientGone(exchange)),
        ctx.served_model(), ctx.options().limits);
    ChatGenerationSpec spec;
    spec.id_prefix = "chatcmpl-";
    spec.make_formatter = [&ctx](const ChatPrompt& p, const std::string& id) {
      const openai::ChatRequest& r = p.request;
      return openai::MakeChatFormatter(
          ctx.tokenizer(), {id, ServingContext::Now(), ctx.model_name()},
          openai::ChatOutputOptions(r, ctx.eos_token_ids(), p.prompt.rendered, ctx.chat_format()),
          r.stream.stream, r.stream.include_usage, r.sampling.logprobs);
    };
    StartChatGeneration(ctx, std::move(req), body.size(), exchange, arrival, std::move(admission),
                        std::move(spec));
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
