// StartChatGeneration (see chat_generation.h).
#include "gateway/api/chat_generation.h"

#include <utility>

#include "gateway/api/generation_launch.h"
#include "gateway/api/prompt_limit.h"

namespace m3::api {

void StartChatGeneration(const ServingContext& ctx, openai::ChatRequest request, size_t body_bytes,
                         const std::shared_ptr<net::HttpExchange>& exchange,
                         std::chrono::steady_clock::time_point arrival,
                         std::shared_ptr<void> admission, ChatGenerationSpec spec) {
  const ErrorStyle style = spec.style;
  try {
    StartChatPrompt(
        ctx, std::move(request), body_bytes <= ServingContext::kInlineBodyBytes,
        [&ctx, exchange, arrival, admission = std::move(admission), spec = std::move(spec)](
            std::shared_ptr<ChatPrompt> p, std::exception_ptr error) {
          try {
            if (error) std::rethrow_exception(error);
            if (p->prompt.over_max_ids) ThrowPromptOverContext(ctx, "messages");
            GenerationJob job;
            job.request_id = ctx.NewId(spec.id_prefix);
            job.prompt_ids = p->prompt.ids;  // p keeps its own: the formatter reads it
            job.media = std::move(p->media);
            job.sampling = p->request.sampling;
            // What the formatter does not read goes now; the rest lives as long as the
            // response, for a retry on another engine to make its formatter afresh.
            p->request.messages = openai::Json();
            p->request.media.clear();
            job.make_formatter = [make = spec.make_formatter, p, id = job.request_id] {
              return make(*p, id);
            };
            job.arrival = arrival;
            job.admission = admission;
            LaunchGeneration(ctx, exchange, std::move(job));
          } catch (...) {
            exchange->Respond(ErrorResponseFor(std::current_exception(), spec.style));
          }
        },
        [exchange] { return !exchange->connected(); }, GenerationMaxIds(ctx));
  } catch (...) {
    exchange->Respond(ErrorResponseFor(std::current_exception(), style));
  }
}

}  // namespace m3::api
