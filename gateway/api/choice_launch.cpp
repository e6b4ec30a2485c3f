// Admission and staggered launch of an n > 1 request's choices (see choice_launch.h).
#include "gateway/api/choice_launch.h"

#include <atomic>
#include <utility>
#include <vector>

#include "gateway/api/choice_fan_in.h"
#include "gateway/openai/request_error.h"

namespace m3::api {

std::shared_ptr<void> AdmitChoices(const ServingContext& ctx, int extra) {
  int taken = 0;
  while (taken < extra && ctx.TryAdmit()) ++taken;
  auto slots = std::shared_ptr<void>(nullptr, [&ctx, taken](void*) {
    for (int i = 0; i < taken; ++i) ctx.Release();
  });
  if (taken < extra) {
    throw openai::RequestError(ErrorCode::kResourceExhausted,
                               "the server cannot take " + std::to_string(extra + 1) +
                                   " more generations (n) now; retry later or ask for fewer",
                               "n", "too_many_requests");
  }
  return slots;
}

void LaunchChoices(const ServingContext& ctx, const std::shared_ptr<net::HttpExchange>& exchange,
                   engine_client::GenerationRequest request, int n, ResponseSink sink,
                   std::shared_ptr<SessionHandle> handle, FormatterFactory make_formatter) {
  const auto& ids = request.request.token_ids();
  request.preferred =
      ctx.router().Pick({}, std::span<const int32_t>(ids.data(), static_cast<size_t>(ids.size())));
  auto requests = std::make_shared<std::vector<engine_client::GenerationRequest>>();
  const std::string base_id = request.request.request_id();
  for (int i = 0; i < n; ++i) {
    engine_client::GenerationRequest r = request;
    if (i > 0) r.request.set_request_id(base_id + "-" + std::to_string(i));
    if (request.request.sampling().has_seed())
      r.request.mutable_sampling()->set_seed(request.request.sampling().seed() +
                                             static_cast<uint64_t>(i));
    requests->push_back(std::move(r));
  }
  const bool streaming = make_formatter()->streaming();
  auto fan =
      std::make_shared<ChoiceFanIn>(n, streaming, std::move(sink), [handle] { handle->Cancel(); });
  engine_client::EngineRouter& router = ctx.router();
  auto start = [&router, requests, handle, make_formatter](const std::shared_ptr<ChoiceFanIn>& f,
                                                           int i) {
    handle->Set(engine_client::GenerationSession::Start(router, (*requests)[static_cast<size_t>(i)],
                                                        f->Observer(i, make_formatter)));
  };
  auto launched_rest = std::make_shared<std::atomic<bool>>(false);
  std::weak_ptr<ChoiceFanIn> weak = fan;
  fan->OnFirstProgress([weak, start, launched_rest, n](int index) {
    if (index != 0 || launched_rest->exchange(true)) return;
    auto f = weak.lock();
    if (!f) return;
    for (int i = 1; i < n && !f->finished(); ++i) start(f, i);
  });
  exchange->OnDisconnect([handle] { handle->Cancel(); });
  start(fan, 0);
}

}  // namespace m3::api
