// One chat request's media on the shared fetch context and the worker pool (see media_stage.h).
#include "gateway/api/media_stage.h"

#include <atomic>
#include <chrono>
#include <string>
#include <utility>

#include "gateway/api/image_detail.h"
#include "gateway/net/api_error.h"
#include "gateway/net/media_fetcher.h"
#include "gateway/net/shared_byte_budget.h"

namespace m3::api {
namespace {

using Clock = std::chrono::steady_clock;

struct Stage {
  explicit Stage(const ServingContext& c) : ctx(c) {}
  const ServingContext& ctx;
  std::vector<content::MediaRef> refs;
  std::vector<std::string> bytes;  // fetched, per item, until decoded
  std::shared_ptr<PreparedMedia> out = std::make_shared<PreparedMedia>();
  MediaDone done;
  MediaAbandoned abandoned;
  Clock::time_point deadline;
  // The request's media bytes (FetchOptions::max_request_bytes), charged by every item as its
  // bytes arrive, so items fetched at once never together pass the limit.
  std::shared_ptr<net::SharedByteBudget> budget;
  std::atomic<size_t> remaining{0};
  std::atomic<bool> failed{false};
  std::atomic<int64_t> pixels{0};
  std::atomic<int64_t> output_bytes{0};
};

std::exception_ptr QueueFull() {
  return std::make_exception_ptr(
      Error(ErrorCode::kResourceExhausted, "the media queue is full; retry later"));
}

void Finish(const std::shared_ptr<Stage>& s, std::exception_ptr error) {
  if (error) {
    if (!s->failed.exchange(true)) s->done(nullptr, error);
    return;
  }
  if (s->remaining.fetch_sub(1) == 1 && !s->failed.load()) s->done(s->out, nullptr);
}

// Before each fetch and decode: a client that has gone gets no more work done for it (the
// engine request that would follow is never made either).
void CheckClient(const Stage& s) {
  if (s.abandoned && s.abandoned()) {
    throw Error(ErrorCode::kUnavailable, "the client disconnected before its media were ready");
  }
}

void CheckDeadline(const Stage& s) {
  if (Clock::now() >= s.deadline) {
    throw Error(ErrorCode::kDeadlineExceeded,
                "the request's time limit of " +
                    std::to_string(s.ctx.media_service().limits().request_timeout.count()) +
                    " ms for its media ran out");
  }
}

// Item i's bytes have arrived (already charged to the request's byte budget): held against
// the process's memory budget until the request is done.
void Keep(Stage& s, size_t i, net::FetchedMedia media) {
  if (!s.out->held[i].TryGrow(static_cast<int64_t>(media.bytes.size()))) {
    throw Error(ErrorCode::kResourceExhausted,
                "the server is busy: media in flight would exceed its memory budget; retry later");
  }
  s.bytes[i] = std::move(media.bytes);
}

void Decode(Stage& s, size_t i) {
  CheckClient(s);
  CheckDeadline(s);
  const preprocess::PreprocessLimits& limits = s.ctx.media_service().limits();
  const media::OutputCheck check = [&s, i, &limits](int64_t item_pixels, int64_t item_bytes) {
    if (s.pixels.fetch_add(item_pixels) + item_pixels > limits.max_pixels) {
      throw Error(ErrorCode::kTooLarge,
                  "the request's media resize to more than this server's limit of " +
                      std::to_string(limits.max_pixels) +
                      " pixels per request (send fewer or smaller items, or detail \"low\")");
    }
    if (s.output_bytes.fetch_add(item_bytes) + item_bytes > limits.max_output_bytes) {
      throw Error(ErrorCode::kTooLarge,
                  "the request's media tensors are over this server's limit of " +
                      std::to_string(limits.max_output_bytes) + " bytes");
    }
    if (!s.out->held[i].TryGrow(item_bytes)) {
      throw Error(
          ErrorCode::kResourceExhausted,
          "the server is busy: media in flight would exceed its memory budget; retry later");
    }
  };
  const content::MediaRef& ref = s.refs[i];
  const media::MediaPreprocessor& pre = s.ctx.preprocessor();
  s.out->items[i] = ref.kind == content::MediaKind::kVideo
                        ? pre.ProcessVideo(s.bytes[i], {}, check)
                        : pre.ProcessImage(s.bytes[i], MediaOptionsForDetail(ref.detail), check);
  std::string().swap(s.bytes[i]);
}

// Runs `step` for item i; false (and the stage finished with the error) when it threw.
template <typename Step>
bool Run(const std::shared_ptr<Stage>& s, size_t i, Step step) {
  if (s->failed.load()) return false;  // another item failed: the request is answered
  try {
    step(*s, i);
    return true;
  } catch (...) {
    Finish(s, net::NameParam(std::current_exception(), s->refs[i].param));
    return false;
  }
}

void DecodeAndFinish(const std::shared_ptr<Stage>& s, size_t i, Clock::time_point start) {
  if (!Run(s, i, Decode)) return;
  s->ctx.metrics().RecordPreprocess(std::string(content::MediaKindName(s->refs[i].kind)),
                                    std::chrono::duration<double>(Clock::now() - start).count());
  Finish(s, nullptr);
}

// Item i from its reference. http(s): a coroutine on the shared fetch context, so no thread
// waits on the network for it; its bytes go to the worker pool for decoding as they arrive.
// data: URIs and local files: read here, on the worker running this, and decoded at once.
void FetchItem(const std::shared_ptr<Stage>& s, size_t i, Clock::time_point start) {
  const bool remote = net::MediaFetcher::IsRemote(s->refs[i].url);
  // A remote fetch checks the deadline itself (and ends by it).
  if (!Run(s, i, [remote](Stage& stage, size_t) {
        CheckClient(stage);
        if (!remote) CheckDeadline(stage);
      })) {
    return;
  }
  // A data: URI's text is dropped once read (the item holds its bytes instead).
  std::string ref = remote ? s->refs[i].url : std::move(s->refs[i].url);
  s->ctx.media_service().fetcher().FetchAsync(
      std::move(ref), s->refs[i].kind, s->budget, s->deadline,
      [s, i, start, remote](std::exception_ptr error, net::FetchedMedia media) {
        if (error) return Finish(s, net::NameParam(error, s->refs[i].param));
        const bool kept =
            Run(s, i, [&media](Stage& stage, size_t item) { Keep(stage, item, std::move(media)); });
        if (!kept) return;
        if (!remote) return DecodeAndFinish(s, i, start);
        // On a network thread: the decode goes to the workers.
        if (!s->ctx.pools().workers->TrySubmit([s, i, start] { DecodeAndFinish(s, i, start); })) {
          Finish(s, QueueFull());
        }
      });
}

}  // namespace

void PrecheckMedia(const ServingContext& ctx, const std::vector<content::MediaRef>& refs) {
  for (const auto& ref : refs) {
    try {
      ctx.media_service().fetcher().Precheck(ref.url, ref.kind);
    } catch (const Error& e) {
      throw net::ParamError(e.code(), ref.param + ": " + e.what(), ref.param);
    }
  }
}

void StartMediaStage(const ServingContext& ctx, std::vector<content::MediaRef> refs, MediaDone done,
                     MediaAbandoned abandoned) {
  auto s = std::make_shared<Stage>(ctx);
  const size_t n = refs.size();
  s->refs = std::move(refs);
  s->bytes.resize(n);
  s->out->items.resize(n);
  s->out->held.reserve(n);
  for (size_t i = 0; i < n; ++i) s->out->held.push_back(ctx.media_service().OpenReservation());
  s->done = std::move(done);
  s->abandoned = std::move(abandoned);
  s->deadline = Clock::now() + ctx.media_service().limits().request_timeout;
  s->remaining = n;
  s->budget = std::make_shared<net::SharedByteBudget>(
      ctx.media_service().fetcher().options().max_request_bytes);
  for (size_t i = 0; i < n && !s->failed.load(); ++i) {
    const Clock::time_point start = Clock::now();
    if (net::MediaFetcher::IsRemote(s->refs[i].url)) {
      FetchItem(s, i, start);
    } else if (!ctx.pools().workers->TrySubmit([s, i, start] { FetchItem(s, i, start); })) {
      Finish(s, QueueFull());
    }
  }
}

}  // namespace m3::api
