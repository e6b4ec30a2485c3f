// Chat request -> media -> prompt ids (see chat_prompt.h).
#include "gateway/api/chat_prompt.h"

#include <utility>
#include <vector>

namespace m3::api {
namespace {

void Build(const ServingContext& ctx, const std::shared_ptr<ChatPrompt>& p, const PromptDone& done,
           const MediaAbandoned& abandoned, size_t max_ids) {
  try {
    // Rendering and tokenizing a large prompt costs up to a second: not for a client gone.
    if (abandoned && abandoned()) {
      throw Error(ErrorCode::kUnavailable, "the client left before its prompt was built");
    }
    std::vector<text::MediaExpansion> expansions;
    if (p->media) {
      for (size_t i = 0; i < p->media->items.size(); ++i) {
        const media::PreprocessedMedia& item = p->media->items[i];
        expansions.push_back({p->request.media[i].kind, item.prompt_expansion,
                              static_cast<size_t>(item.placeholder_tokens)});
      }
    }
    p->prompt = ctx.prompt_builder().Build(
        p->request.ToPromptInput(ctx.options().default_chat_template_kwargs), expansions, max_ids);
  } catch (...) {
    return done(nullptr, std::current_exception());
  }
  done(p, nullptr);
}

}  // namespace

void StartChatPrompt(const ServingContext& ctx, openai::ChatRequest request, bool inline_ok,
                     PromptDone done, MediaAbandoned abandoned, size_t max_ids) {
  auto p = std::make_shared<ChatPrompt>();
  p->request = std::move(request);
  if (p->request.media.empty()) {
    if (inline_ok) return Build(ctx, p, done, abandoned, max_ids);
    if (!ctx.pools().workers->TrySubmit(
            [&ctx, p, done, abandoned, max_ids] { Build(ctx, p, done, abandoned, max_ids); })) {
      done(nullptr, std::make_exception_ptr(Error(ErrorCode::kResourceExhausted,
                                                  "the worker queue is full; retry later")));
    }
    return;
  }
  PrecheckMedia(ctx, p->request.media);
  StartMediaStage(
      ctx, p->request.media,
      [&ctx, p, done, abandoned, max_ids](std::shared_ptr<PreparedMedia> media,
                                          std::exception_ptr error) {
        if (error) return done(nullptr, error);
        p->media = std::move(media);
        Build(ctx, p, done, abandoned, max_ids);
      },
      abandoned);
}

}  // namespace m3::api
