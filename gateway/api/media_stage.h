// The media of one chat request, fetched and preprocessed concurrently: every http(s) item is
// fetched asynchronously on the process's shared fetch context (MediaFetcher::FetchAsync, so no
// thread waits on the network for it, however slow the origin) and decoded and resized on the
// worker pool as soon as its bytes arrive (data: URIs are read and decoded there directly), all
// items at once, under one deadline for the whole request. The request's limits hold across items
// however they interleave: media bytes (FetchOptions::max_request_bytes), resized pixels and output
// tensor bytes (PreprocessLimits), and what every item holds is charged to the process memory
// budget until the request is done. The first failure ends the request (a ParamError naming the
// item's field); a full queue or too many fetches in flight is a 429 at once. A request whose
// client has gone starts no more fetches and decodes nothing more.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "gateway/api/serving_context.h"
#include "gateway/content/media_ref.h"
#include "gateway/net/memory_budget.h"

namespace m3::api {

struct PreparedMedia {
  std::vector<media::PreprocessedMedia> items;  // request order
  // Memory budget held for the items' bytes; released with this object.
  std::vector<net::MemoryBudget::Reservation> held;
};

// Called once, on a pool thread (or the calling thread when nothing could be queued), with the
// media or the error.
using MediaDone =
    std::function<void(std::shared_ptr<PreparedMedia> media, std::exception_ptr error)>;
// Whether the request's client has gone (e.g. !exchange->connected()); polled, thread-safe.
using MediaAbandoned = std::function<bool()>;

// The checks that need no I/O (URL syntax and scheme, the SSRF guard for literal addresses, the
// local-file policy, data: URI headers), on the calling thread; throws a ParamError.
void PrecheckMedia(const ServingContext& ctx, const std::vector<content::MediaRef>& refs);

// `refs` non-empty and prechecked. `ctx` must outlive the work. Once `abandoned` (when set)
// answers true, `done` gets an error and no further item is fetched or decoded.
void StartMediaStage(const ServingContext& ctx, std::vector<content::MediaRef> refs, MediaDone done,
                     MediaAbandoned abandoned = {});

}  // namespace m3::api
