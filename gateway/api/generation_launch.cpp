// Admission and dispatch; prompt ids + media -> engine request -> session on the exchange
// (see generation_launch.h).
#include "gateway/api/generation_launch.h"

#include <utility>

#include "gateway/api/choice_launch.h"
#include "gateway/api/error_response.h"
#include "gateway/api/exchange_sink.h"
#include "gateway/api/generation_responder.h"
#include "gateway/api/timed_formatter.h"
#include "gateway/engine_client/engine_request.h"
#include "gateway/engine_client/generation_session.h"

namespace m3::api {

void AdmitAndDispatch(const ServingContext& ctx, net::HttpRequest&& request,
                      std::shared_ptr<net::HttpExchange> exchange,
                      std::chrono::steady_clock::time_point arrival, GenerationRun run,
                      ErrorStyle style) {
  if (!ctx.TryAdmit()) {
    return exchange->Respond(
        ErrorResponse(style, 429, "the server has too many requests in flight; retry later",
                      "too_many_requests"));
  }
  std::shared_ptr<void> admission(nullptr, [&ctx](void*) { ctx.Release(); });
  auto body = std::make_shared<std::string>(std::move(request.body()));
  const size_t size = body->size();
  if (!ctx.Dispatch(size, [&ctx, body, exchange, arrival, admission, run] {
        run(ctx, *body, exchange, arrival, admission);
      })) {
    exchange->Respond(
        ErrorResponse(style, 429, "the request queue is full; retry later", "queue_full"));
  }
}

void LaunchGeneration(const ServingContext& ctx, std::shared_ptr<net::HttpExchange> exchange,
                      GenerationJob job) {
  // Each further choice is an engine request of its own: it takes an admission slot too.
  std::shared_ptr<void> extra_slots;
  if (job.sampling.n > 1) {
    extra_slots = AdmitChoices(ctx, job.sampling.n - 1);
    job.admission = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
        std::move(job.admission), std::move(extra_slots));
  }
  const int64_t max_tokens = openai::ResolveMaxTokens(job.sampling, job.prompt_ids.size(),
                                                      ctx.max_model_len(), job.prompt_param);
  std::vector<engine_client::EngineMedia> media;
  if (job.media) {
    for (const media::PreprocessedMedia& item : job.media->items) {
      media.push_back({item.kind == content::MediaKind::kVideo, &item.pixel_values, item.grid_thw,
                       item.placeholder_tokens});
    }
  }
  // The pixel dtype of the engine that would take the request now (engines of one model
  // normally agree; a retry elsewhere still works, the engine converts what it is sent).
  std::string dtype = "F32";
  if (!media.empty()) {
    const auto engine = ctx.router().Pick();  // 503 when none can serve
    if (auto info = engine->model_info(); info && !info->preferred_pixel_dtype().empty()) {
      dtype = info->preferred_pixel_dtype();
    }
  }
  engine_client::GenerationRequest request;
  request.request = engine_client::BuildGenerateRequest(job.request_id, job.prompt_ids, media,
                                                        job.sampling, max_tokens, dtype);
  request.top_logprobs = job.sampling.top_logprobs;
  // The pixels are in the request now; only the memory budget's hold is kept.
  std::shared_ptr<void> keep =
      std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
          std::move(job.admission),
          job.media ? std::shared_ptr<void>(job.media, &job.media->held) : std::shared_ptr<void>());
  if (job.media) {
    for (auto& item : job.media->items) item.pixel_values = HostTensor();
  }
  ctx.metrics().RecordSetup(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - job.arrival).count());
  auto handle = std::make_shared<SessionHandle>();
  FormatterFactory make_formatter = [make = std::move(job.make_formatter), &ctx,
                                     arrival = job.arrival] {
    return MakeTimedFormatter(make(), ctx.metrics(), arrival);
  };
  if (job.sampling.n > 1) {
    return LaunchChoices(ctx, exchange, std::move(request), job.sampling.n,
                         MakeExchangeSink(exchange, handle, std::move(keep)), handle,
                         std::move(make_formatter));
  }
  auto responder = MakeGenerationResponder(
      make_formatter(), MakeExchangeSink(exchange, handle, std::move(keep)), make_formatter);
  exchange->OnDisconnect([handle] { handle->Cancel(); });
  handle->Set(engine_client::GenerationSession::Start(ctx.router(), std::move(request),
                                                      std::move(responder)));
}

}  // namespace m3::api
