// /v1/models (see model_list.h).
#include "gateway/api/model_list.h"

#include <nlohmann/json.hpp>

#include "gateway/api/error_response.h"
#include "gateway/net/http_server.h"

namespace m3::api {
namespace {

nlohmann::ordered_json ModelObject(const ServingContext& ctx) {
  // "created": when this gateway loaded it (the model directory carries no date).
  static const int64_t created = ServingContext::Now();
  return {{"id", ctx.model_name()},
          {"object", "model"},
          {"created", created},
          {"owned_by", "m3serve"},
          {"root", ctx.model_name()},
          {"parent", nullptr},
          {"max_model_len", ctx.max_model_len()}};
}

std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void HandleModelList(const ServingContext& ctx, net::HttpExchange& exchange) {
  const nlohmann::ordered_json list = {{"object", "list"},
                                       {"data", nlohmann::ordered_json::array({ModelObject(ctx)})}};
  exchange.Respond(net::JsonResponse(200, Dump(list)));
}

void HandleModel(const ServingContext& ctx, std::string_view name, net::HttpExchange& exchange) {
  if (name != ctx.model_name()) {
    return exchange.Respond(ErrorResponse(404,
                                          "the model '" + std::string(name.substr(0, 256)) +
                                              "' does not exist; this server serves '" +
                                              ctx.model_name() + "'",
                                          "model_not_found", "model"));
  }
  exchange.Respond(net::JsonResponse(200, Dump(ModelObject(ctx))));
}

}  // namespace m3::api
