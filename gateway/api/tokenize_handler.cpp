// /tokenize and /detokenize (see tokenize_handler.h).
#include "gateway/api/tokenize_handler.h"

#include <utility>

#include "gateway/api/chat_prompt.h"
#include "gateway/api/client_gone.h"
#include "gateway/api/error_response.h"
#include "gateway/api/prompt_limit.h"
#include "gateway/net/http_server.h"
#include "gateway/openai/request_body.h"
#include "gateway/openai/request_common.h"
#include "gateway/openai/request_error.h"

namespace m3::api {
namespace {

using openai::Json;

void Answer(const ServingContext& ctx, net::HttpExchange& exchange, const std::vector<int32_t>& ids,
            bool token_strs) {
  Json out = {{"count", ids.size()},
              {"max_model_len", ctx.max_model_len()},
              {"tokens", ids},
              {"token_strs", nullptr}};
  if (token_strs) {
    Json strs = Json::array();
    for (const int32_t id : ids) strs.push_back(ctx.tokenizer().IdToToken(id));
    out["token_strs"] = std::move(strs);
  }
  exchange.Respond(
      net::JsonResponse(200, out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
}

void Tokenize(const ServingContext& ctx, const std::string& text,
              const std::shared_ptr<net::HttpExchange>& exchange) {
  try {
    Json body = openai::ParseRequestBody(text, ctx.options().limits, ClientGone(exchange));
    const openai::FieldReader fields(body, "");
    const openai::ServedModel model = ctx.served_model();
    openai::ParseModel(fields, model);
    const bool token_strs = fields.Bool("return_token_strs").value_or(false);
    const bool has_prompt = fields.Has("prompt"), has_messages = fields.Has("messages");
    if (has_prompt == has_messages) {
      throw openai::RequestError(ErrorCode::kInvalidArgument,
                                 "give either \"prompt\" (text) or \"messages\" (a chat)",
                                 has_prompt ? "messages" : "prompt",
                                 has_prompt ? "invalid_value" : "missing_required_parameter");
    }
    if (has_prompt) {
      const std::string prompt = fields.RequiredString("prompt");
      const bool special = fields.Bool("add_special_tokens").value_or(true);
      const std::vector<int32_t> ids = ctx.tokenizer().Encode(prompt, special, kMaxCountedTokens);
      if (ids.size() > kMaxCountedTokens) ThrowOverCountLimit("prompt");
      return Answer(ctx, *exchange, ids, token_strs);
    }
    // The chat fields as a chat completion reads them; /tokenize's own are not sampling fields.
    body.erase("return_token_strs");
    body.erase("add_special_tokens");
    openai::ChatRequest req = openai::ParseChatRequest(body, model, ctx.options().limits);
    StartChatPrompt(
        ctx, std::move(req), text.size() <= ServingContext::kInlineBodyBytes,
        [&ctx, exchange, token_strs](std::shared_ptr<ChatPrompt> p, std::exception_ptr error) {
          try {
            if (error) std::rethrow_exception(error);
            if (p->prompt.over_max_ids) ThrowOverCountLimit("messages");
            Answer(ctx, *exchange, p->prompt.ids, token_strs);
          } catch (...) {
            exchange->Respond(ErrorResponseFor(std::current_exception()));
          }
        },
        [exchange] { return !exchange->connected(); }, kMaxCountedTokens);
  } catch (...) {
    exchange->Respond(ErrorResponseFor(std::current_exception()));
  }
}

void Detokenize(const ServingContext& ctx, const std::string& text, net::HttpExchange& exchange) {
  try {
    const Json body = openai::ParseRequestBody(text, ctx.options().limits, ClientGone(exchange));
    const openai::FieldReader fields(body, "");
    openai::ParseModel(fields, ctx.served_model());
    const Json* tokens = fields.Array("tokens");
    if (!tokens) {
      throw openai::RequestError(ErrorCode::kInvalidArgument,
                                 "\"tokens\" (a list of ids) is required", "tokens",
                                 "missing_required_parameter");
    }
    std::vector<int32_t> ids;
    ids.reserve(tokens->size());
    for (size_t i = 0; i < tokens->size(); ++i) {
      const Json& t = (*tokens)[i];
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx.vocab_size()) {
        throw openai::RequestError(ErrorCode::kInvalidArgument,
                                   "tokens[" + std::to_string(i) +
                                       "] is not a token id of this model (0 to " +
                                       std::to_string(ctx.vocab_size() - 1) + ")",
                                   "tokens[" + std::to_string(i) + "]", "invalid_value");
      }
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    const Json out = {{"prompt", ctx.tokenizer().Decode(ids, false)}};
    exchange.Respond(
        net::JsonResponse(200, out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  } catch (...) {
    exchange.Respond(ErrorResponseFor(std::current_exception()));
  }
}

}  // namespace

void HandleTokenize(const ServingContext& ctx, net::HttpRequest&& request,
                    std::shared_ptr<net::HttpExchange> exchange) {
  auto body = std::make_shared<std::string>(std::move(request.body()));
  if (!ctx.Dispatch(body->size(), [&ctx, body, exchange] { Tokenize(ctx, *body, exchange); })) {
    exchange->Respond(ErrorResponse(429, "the request queue is full; retry later", "queue_full"));
  }
}

void HandleDetokenize(const ServingContext& ctx, net::HttpRequest&& request,
                      std::shared_ptr<net::HttpExchange> exchange) {
  auto body = std::make_shared<std::string>(std::move(request.body()));
  if (!ctx.Dispatch(body->size(), [&ctx, body, exchange] { Detokenize(ctx, *body, *exchange); })) {
    exchange->Respond(ErrorResponse(429, "the request queue is full; retry later", "queue_full"));
  }
}

}  // namespace m3::api
