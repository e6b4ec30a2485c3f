// The preprocessing pipeline behind /v1/preprocess and the gRPC Preprocess service: fetch
// each item (MediaFetcher), decode/resize/patchify it (media::MediaPreprocessor), and gather
// the results into the tensors the engine would receive, concatenated in request order.
// Run() is blocking and CPU-heavy: call it on a worker pool thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/media/media_preprocessor.h"
#include "gateway/net/media_fetcher.h"
#include "gateway/net/preprocess_request.h"
#include "shared/safetensors.h"

namespace m3::net {

struct PreprocessResult {
  std::vector<media::PreprocessedMedia> items;  // request order
  // pixel_values + image_grid_thw (images), pixel_values_videos + video_grid_thw +
  // video_timestamps (videos); only the names of kinds present.
  NamedTensors tensors;
  nlohmann::json item_metadata;  // [{index, kind, grid_thw, placeholder_tokens, ...}]
};

class PreprocessService {
 public:
  PreprocessService(std::shared_ptr<const MediaFetcher> fetcher,
                    std::shared_ptr<const media::MediaPreprocessor> preprocessor);

  // Errors are ParamErrors naming the item ("content[1].image_url.url: ...").
  PreprocessResult Run(const PreprocessRequest& request) const;

  const MediaFetcher& fetcher() const { return *fetcher_; }

 private:
  std::shared_ptr<const MediaFetcher> fetcher_;
  std::shared_ptr<const media::MediaPreprocessor> preprocessor_;
};

// Gathers processed items into the output tensors and metadata (used by Run; public so tests
// can build the expected answer from media::MediaPreprocessor directly).
PreprocessResult GatherResults(std::vector<media::PreprocessedMedia> items);

// safetensors bytes; __metadata__ holds "items" (the item metadata as JSON text).
std::string EncodeSafetensors(const PreprocessResult& result);
// {"tensors": {name: {"dtype", "shape", "data": base64}}, "items": [...]}
nlohmann::json EncodeJson(const PreprocessResult& result);

}  // namespace m3::net
