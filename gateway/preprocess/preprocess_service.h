// The preprocessing pipeline behind /v1/preprocess and the gRPC Preprocess service, in three
// stages so that each runs where it belongs: Admit (cheap checks against PreprocessLimits and
// each reference's syntax/policy, on the network thread, before anything is queued), FetchAll
// (each item through net::MediaFetcher under one request deadline; blocking I/O, on a fetch pool)
// and Process (decode/resize/patchify with media::MediaPreprocessor, CPU-heavy, on the worker
// pool), which gathers the results into the tensors the engine would receive, concatenated in
// request order. Bytes held between and during the stages (fetched media, output tensors) are
// charged to the process-wide net::MemoryBudget when one is given.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/media/media_preprocessor.h"
#include "gateway/net/media_fetcher.h"
#include "gateway/net/memory_budget.h"
#include "gateway/preprocess/preprocess_limits.h"
#include "gateway/preprocess/preprocess_request.h"
#include "shared/safetensors.h"

namespace m3::preprocess {

struct PreprocessResult {
  std::vector<media::PreprocessedMedia> items;  // request order
  // pixel_values + image_grid_thw (images), pixel_values_videos + video_grid_thw +
  // video_timestamps (videos); only the names of kinds present.
  NamedTensors tensors;
  nlohmann::json item_metadata;  // [{index, kind, grid_thw, placeholder_tokens, ...}]
};

// What one request has taken so far: its output pixels and bytes (against PreprocessLimits)
// and its memory reservation. A request's items may be charged from several threads at once;
// `mu` guards all of it, the reservation included.
struct RequestCharges {
  explicit RequestCharges(net::MemoryBudget::Reservation* held) : held(held) {}
  std::mutex mu;
  net::MemoryBudget::Reservation* held;  // may be null
  int64_t pixels = 0;
  int64_t bytes = 0;
};

class PreprocessService {
 public:
  using Clock = std::chrono::steady_clock;

  PreprocessService(std::shared_ptr<const net::MediaFetcher> fetcher,
                    std::shared_ptr<const media::MediaPreprocessor> preprocessor,
                    PreprocessLimits limits = {},
                    std::shared_ptr<net::MemoryBudget> memory = nullptr);

  // Errors of all stages are ParamErrors naming the item ("content[1].image_url.url: ...").
  // No I/O but a stat for local files: the item count, the resize options, each reference.
  void Admit(const PreprocessRequest& request) const;
  // Whether FetchAll will go to the network (an http(s) item).
  static bool NeedsNetwork(const PreprocessRequest& request);
  // Fetches every item before `deadline`; the data: URIs' text is released as it is decoded.
  // Fetched bytes are charged to `held` (kResourceExhausted when the budget is spent).
  std::vector<net::FetchedMedia> FetchAll(PreprocessRequest& request, Clock::time_point deadline,
                                          net::MemoryBudget::Reservation* held) const;
  // Decodes and gathers; output tensors are checked against the limits and charged to `held`
  // before they are allocated.
  PreprocessResult Process(const PreprocessRequest& request, std::vector<net::FetchedMedia> fetched,
                           net::MemoryBudget::Reservation* held) const;
  // One item of Process: decodes `bytes` (released once decoded) with the request's
  // options, charging its outputs to `charges`. Errors are ParamErrors naming `ref.param`.
  media::PreprocessedMedia ProcessItem(const content::MediaRef& ref,
                                       const media::MediaOptions& options, std::string& bytes,
                                       RequestCharges& charges) const;
  // Charges fetched bytes to the request's reservation: kResourceExhausted when the memory
  // budget has no room.
  void ChargeFetched(RequestCharges& charges, int64_t bytes) const;
  // All three stages on the calling thread, under the configured request deadline.
  PreprocessResult Run(PreprocessRequest request) const;

  // An empty reservation on the memory budget (one that never refuses when there is none).
  net::MemoryBudget::Reservation OpenReservation() const;

  const net::MediaFetcher& fetcher() const { return *fetcher_; }
  const PreprocessLimits& limits() const { return limits_; }

 private:
  std::shared_ptr<const net::MediaFetcher> fetcher_;
  std::shared_ptr<const media::MediaPreprocessor> preprocessor_;
  PreprocessLimits limits_;
  std::shared_ptr<net::MemoryBudget> memory_;
};

// Gathers processed items into the output tensors and metadata (used by Process; public so
// tests can build the expected answer from media::MediaPreprocessor directly). The items'
// own pixel tensors are released once copied into the concatenated ones.
PreprocessResult GatherResults(std::vector<media::PreprocessedMedia> items);

// safetensors bytes; __metadata__ holds "items" (the item metadata as JSON text).
std::string EncodeSafetensors(const PreprocessResult& result);
// {"tensors": {name: {"dtype", "shape", "data": base64}}, "items": [...]}
nlohmann::json EncodeJson(const PreprocessResult& result);

}  // namespace m3::preprocess
