// One chat request's media on the fetch and worker pools (see media_stage.h).
#include "gateway/api/media_stage.h"

#include <atomic>
#include <chrono>
#include <string>
#include <utility>

#include "gateway/api/image_detail.h"
#include "gateway/net/api_error.h"
#include "gateway/net/url.h"

namespace m3::api {
namespace {

using Clock = std::chrono::steady_clock;

net::MediaKind FetchKind(text::MediaKind kind) {
  return kind == text::MediaKind::kVideo ? net::MediaKind::kVideo : net::MediaKind::kImage;
}

struct Stage {
  explicit Stage(const ServingContext& c) : ctx(c) {}
  const ServingContext& ctx;
  std::vector<openai::MediaRef> refs;
  std::vector<std::string> bytes;  // fetched, per item, until decoded
  std::shared_ptr<PreparedMedia> out = std::make_shared<PreparedMedia>();
  MediaDone done;
  Clock::time_point deadline;
  std::atomic<size_t> remaining{0};
  std::atomic<bool> failed{false};
  std::atomic<int64_t> fetched_bytes{0};
  std::atomic<int64_t> pixels{0};
  std::atomic<int64_t> output_bytes{0};
};

std::exception_ptr QueueFull() {
  return std::make_exception_ptr(
      Error(ErrorCode::kResourceExhausted, "the media queue is full; retry later"));
}

// The error as the client sees it: which item, and why.
std::exception_ptr ForItem(const openai::MediaRef& ref, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const net::ParamError&) {
    return error;
  } catch (const Error& e) {
    return std::make_exception_ptr(
        net::ParamError(e.code(), ref.param + ": " + e.what(), ref.param));
  } catch (...) {
    return error;
  }
}

void Finish(const std::shared_ptr<Stage>& s, std::exception_ptr error) {
  if (error) {
    if (!s->failed.exchange(true)) s->done(nullptr, error);
    return;
  }
  if (s->remaining.fetch_sub(1) == 1 && !s->failed.load()) s->done(s->out, nullptr);
}

void CheckDeadline(const Stage& s) {
  if (Clock::now() >= s.deadline) {
    throw Error(ErrorCode::kDeadlineExceeded,
                "the request's time limit of " +
                    std::to_string(s.ctx.media_service().limits().request_timeout.count()) +
                    " ms for its media ran out");
  }
}

void Fetch(Stage& s, size_t i) {
  CheckDeadline(s);
  const net::MediaFetcher& fetcher = s.ctx.media_service().fetcher();
  const int64_t request_limit = fetcher.options().max_request_bytes;
  net::ByteBudget budget(request_limit);
  net::FetchedMedia m =
      fetcher.Fetch(s.refs[i].url, FetchKind(s.refs[i].kind), &budget, s.deadline);
  const int64_t size = static_cast<int64_t>(m.bytes.size());
  if (s.fetched_bytes.fetch_add(size) + size > request_limit) {
    throw Error(ErrorCode::kTooLarge, "the request's media are over this server's limit of " +
                                          std::to_string(request_limit) + " bytes per request");
  }
  if (!s.out->held[i].TryGrow(size)) {
    throw Error(ErrorCode::kResourceExhausted,
                "the server is busy: media in flight would exceed its memory budget; retry later");
  }
  s.bytes[i] = std::move(m.bytes);
  if (net::UrlScheme(s.refs[i].url) == "data") std::string().swap(s.refs[i].url);
}

void Decode(Stage& s, size_t i) {
  CheckDeadline(s);
  const net::PreprocessLimits& limits = s.ctx.media_service().limits();
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
  const openai::MediaRef& ref = s.refs[i];
  const media::MediaPreprocessor& pre = s.ctx.preprocessor();
  s.out->items[i] = ref.kind == text::MediaKind::kVideo
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
    Finish(s, ForItem(s->refs[i], std::current_exception()));
    return false;
  }
}

void DecodeAndFinish(const std::shared_ptr<Stage>& s, size_t i, Clock::time_point start) {
  if (!Run(s, i, Decode)) return;
  s->ctx.metrics().RecordPreprocess(std::string(text::MediaKindName(s->refs[i].kind)),
                                    std::chrono::duration<double>(Clock::now() - start).count());
  Finish(s, nullptr);
}

}  // namespace

void PrecheckMedia(const ServingContext& ctx, const std::vector<openai::MediaRef>& refs) {
  for (const auto& ref : refs) {
    try {
      ctx.media_service().fetcher().Precheck(ref.url, FetchKind(ref.kind));
    } catch (const Error& e) {
      throw net::ParamError(e.code(), ref.param + ": " + e.what(), ref.param);
    }
  }
}

void StartMediaStage(const ServingContext& ctx, std::vector<openai::MediaRef> refs,
                     MediaDone done) {
  auto s = std::make_shared<Stage>(ctx);
  const size_t n = refs.size();
  s->refs = std::move(refs);
  s->bytes.resize(n);
  s->out->items.resize(n);
  s->out->held.reserve(n);
  for (size_t i = 0; i < n; ++i) s->out->held.push_back(ctx.media_service().OpenReservation());
  s->done = std::move(done);
  s->deadline = Clock::now() + ctx.media_service().limits().request_timeout;
  s->remaining = n;
  const net::PreprocessPools& pools = ctx.pools();
  for (size_t i = 0; i < n && !s->failed.load(); ++i) {
    const Clock::time_point start = Clock::now();
    const std::string scheme = net::UrlScheme(s->refs[i].url);
    bool queued;
    if (scheme == "http" || scheme == "https") {
      std::shared_ptr<net::WorkerPool> workers = pools.workers;
      queued = pools.fetch->TrySubmit([s, i, start, workers] {
        if (!Run(s, i, Fetch)) return;
        if (!workers->TrySubmit([s, i, start] { DecodeAndFinish(s, i, start); })) {
          Finish(s, QueueFull());
        }
      });
    } else {
      queued = pools.workers->TrySubmit([s, i, start] {
        if (Run(s, i, Fetch)) DecodeAndFinish(s, i, start);
      });
    }
    if (!queued) Finish(s, QueueFull());
  }
}

}  // namespace m3::api
