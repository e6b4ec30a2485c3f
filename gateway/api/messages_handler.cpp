// The Anthropic Messages API handlers (see messages_handler.h).
#include "gateway/api/messages_handler.h"

#include <utility>

#include "gateway/anthropic/message_formatter.h"
#include "gateway/anthropic/messages_request.h"
#include "gateway/api/chat_generation.h"
#include "gateway/api/chat_prompt.h"
#include "gateway/api/client_gone.h"
#include "gateway/api/error_response.h"
#include "gateway/api/generation_launch.h"
#include "gateway/api/prompt_limit.h"
#include "gateway/net/http_server.h"
#include "gateway/openai/output_options.h"
#include "gateway/openai/request_body.h"

namespace m3::api {
namespace {

using Clock = std::chrono::steady_clock;
constexpr ErrorStyle kStyle = ErrorStyle::kAnthropic;

void Run(const ServingContext& ctx, const std::string& body,
         const std::shared_ptr<net::HttpExchange>& exchange, Clock::time_point arrival,
         std::shared_ptr<void> admission) {
  try {
    anthropic::MessagesRequest req = anthropic::ParseMessagesRequest(
        openai::ParseRequestBody(body, ctx.options().limits, ClientGone(exchange)),
        ctx.served_model(), ctx.options().limits, anthropic::MessagesEndpoint::kCreate);
    ChatGenerationSpec spec;
    spec.id_prefix = "msg_";
    spec.style = kStyle;
    spec.make_formatter = [&ctx](const ChatPrompt& p, const std::string& id) {
      const openai::ChatRequest& r = p.request;
      // The output is parsed exactly as for a chat completion; only the ids look Anthropic's.
      text::OutputParserOptions options =
          openai::ChatOutputOptions(r, ctx.eos_token_ids(), p.prompt.rendered, ctx.chat_format());
      options.make_tool_call_id = [&ctx](size_t) { return ctx.NewId("toolu_"); };
      return anthropic::MakeMessageFormatter(
          ctx.tokenizer(), {id, ServingContext::Now(), ctx.model_name()}, std::move(options),
          r.stream.stream, static_cast<int64_t>(p.prompt.ids.size()));
    };
    StartChatGeneration(ctx, std::move(req.chat), body.size(), exchange, arrival,
                        std::move(admission), std::move(spec));
  } catch (...) {
    exchange->Respond(ErrorResponseFor(std::current_exception(), kStyle));
  }
}

void CountTokens(const ServingContext& ctx, const std::string& body,
                 const std::shared_ptr<net::HttpExchange>& exchange) {
  try {
    anthropic::MessagesRequest req = anthropic::ParseMessagesRequest(
        openai::ParseRequestBody(body, ctx.options().limits, ClientGone(exchange)),
        ctx.served_model(), ctx.options().limits, anthropic::MessagesEndpoint::kCountTokens);
    // The prompt a generation would get, media placeholders included.
    StartChatPrompt(
        ctx, std::move(req.chat), body.size() <= ServingContext::kInlineBodyBytes,
        [exchange](std::shared_ptr<ChatPrompt> p, std::exception_ptr error) {
          try {
            if (error) std::rethrow_exception(error);
            if (p->prompt.over_max_ids) ThrowOverCountLimit("messages");
            const nlohmann::json out = {{"input_tokens", p->prompt.ids.size()}};
            exchange->Respond(net::JsonResponse(200, out.dump()));
          } catch (...) {
            exchange->Respond(ErrorResponseFor(std::current_exception(), kStyle));
          }
        },
        [exchange] { return !exchange->connected(); }, kMaxCountedTokens);
  } catch (...) {
    exchange->Respond(ErrorResponseFor(std::current_exception(), kStyle));
  }
}

}  // namespace

void HandleMessages(const ServingContext& ctx, net::HttpRequest&& request,
                    std::shared_ptr<net::HttpExchange> exchange, Clock::time_point arrival) {
  AdmitAndDispatch(ctx, std::move(request), std::move(exchange), arrival, &Run, kStyle);
}

void HandleCountTokens(const ServingContext& ctx, net::HttpRequest&& request,
                       std::shared_ptr<net::HttpExchange> exchange) {
  auto body = std::make_shared<std::string>(std::move(request.body()));
  if (!ctx.Dispatch(body->size(), [&ctx, body, exchange] { CountTokens(ctx, *body, exchange); })) {
    exchange->Respond(
        ErrorResponse(kStyle, 429, "the request queue is full; retry later", "queue_full"));
  }
}

}  // namespace m3::api
