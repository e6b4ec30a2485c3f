// StartChatGeneration (see chat_generation.h).
#include "gateway/api/chat_generation.h"

#include <optional>
#include <string_view>
#include <utility>

#include "gateway/api/generation_launch.h"
#include "gateway/api/prompt_limit.h"
#include "gateway/openai/tool_call_constraint.h"
#include "gateway/text/chat_format.h"

namespace m3::api {
namespace {

// The end-of-thinking token when the model's output starts in (or may open) a reasoning block:
// a structured output constrains the answer after it, not the thinking (vLLM's reasoning
// parsers do the same). None when the prompt closed the reasoning or the format has none.
std::optional<int32_t> ReasoningEndToken(const ServingContext& ctx, std::string_view rendered) {
  const text::ChatFormat& format = ctx.chat_format();
  if (!format.reasoning) return std::nullopt;
  const text::ReasoningOptions o = text::ReasoningOptionsFor(*format.reasoning, rendered);
  if (text::DetectReasoningStart(rendered, o.start_tag, o.end_tag) == text::ReasoningStart::kClosed)
    return std::nullopt;
  return ctx.tokenizer().TokenToId(o.end_tag);
}

}  // namespace

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
            if (p->request.tool_choice == openai::ToolChoice::kRequired) {
              job.sampling.structured = openai::ToolCallConstraint(
                  p->request.tools, p->request.forced_tool, p->request.parallel_tool_calls,
                  ctx.chat_format().tool_calls.value_or(text::ToolCallSyntax::kMiniMaxM2));
            }
            if (job.sampling.structured)
              job.sampling.structured->start_after_token =
                  ReasoningEndToken(ctx, p->prompt.rendered);
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
