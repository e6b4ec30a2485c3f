// The preprocessing pipeline and its output encodings (see preprocess_service.h).
#include "gateway/net/preprocess_service.h"

#include <cstring>

#include "gateway/net/api_error.h"
#include "gateway/net/base64.h"

namespace m3::net {
namespace {

using nlohmann::json;
using Kind = media::PreprocessedMedia::Kind;

HostTensor ConcatRows(const std::vector<const HostTensor*>& parts, const char* name) {
  int64_t rows = 0, cols = -1;
  for (const auto* t : parts) {
    Require(t->dtype() == DType::kF32 && t->shape().size() == 2, ErrorCode::kInternal,
            std::string(name) + ": media output is not a 2-D F32 tensor");
    if (cols < 0) cols = t->shape()[1];
    Require(t->shape()[1] == cols, ErrorCode::kInternal,
            std::string(name) + ": items have different patch sizes");
    rows += t->shape()[0];
  }
  HostTensor out(DType::kF32, {rows, cols < 0 ? 0 : cols});
  size_t offset = 0;
  for (const auto* t : parts) {
    if (t->nbytes() > 0) std::memcpy(out.data() + offset, t->data(), t->nbytes());
    offset += t->nbytes();
  }
  return out;
}

HostTensor GridTensor(const std::vector<const media::PreprocessedMedia*>& items) {
  std::vector<int64_t> values;
  for (const auto* m : items) values.insert(values.end(), m->grid_thw.begin(), m->grid_thw.end());
  return HostTensor::FromInt64({static_cast<int64_t>(items.size()), 3}, values);
}

}  // namespace

PreprocessService::PreprocessService(std::shared_ptr<const MediaFetcher> fetcher,
                                     std::shared_ptr<const media::MediaPreprocessor> preprocessor)
    : fetcher_(std::move(fetcher)), preprocessor_(std::move(preprocessor)) {}

PreprocessResult PreprocessService::Run(const PreprocessRequest& request) const {
  ByteBudget budget(fetcher_->options().max_request_bytes);
  std::vector<media::PreprocessedMedia> items;
  items.reserve(request.items.size());
  for (const auto& ref : request.items) {
    try {
      FetchedMedia fetched = ref.bytes
                                 ? fetcher_->FromBytes(*ref.bytes, ref.kind, &budget, ref.param)
                                 : fetcher_->Fetch(ref.url, ref.kind, &budget);
      items.push_back(ref.kind == MediaKind::kImage
                          ? preprocessor_->ProcessImage(fetched.bytes, request.options)
                          : preprocessor_->ProcessVideo(fetched.bytes, request.options));
    } catch (const ParamError&) {
      throw;
    } catch (const Error& e) {
      throw ParamError(e.code(), ref.param + ": " + e.what(), ref.param);
    }
  }
  return GatherResults(std::move(items));
}

PreprocessResult GatherResults(std::vector<media::PreprocessedMedia> items) {
  PreprocessResult result;
  std::vector<const media::PreprocessedMedia*> images, videos;
  std::vector<const HostTensor*> image_pixels, video_pixels;
  std::vector<double> timestamps;
  result.item_metadata = json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& m = items[i];
    bool image = m.kind == Kind::kImage;
    (image ? images : videos).push_back(&m);
    (image ? image_pixels : video_pixels).push_back(&m.pixel_values);
    if (!image) timestamps.insert(timestamps.end(), m.timestamps.begin(), m.timestamps.end());
    json meta = {{"index", i},
                 {"kind", image ? "image" : "video"},
                 {"grid_thw", m.grid_thw},
                 {"patches", m.pixel_values.shape().empty() ? 0 : m.pixel_values.shape()[0]},
                 {"placeholder_tokens", m.placeholder_tokens},
                 {"prompt_expansion", m.prompt_expansion}};
    if (!image) meta["timestamps"] = m.timestamps;
    result.item_metadata.push_back(std::move(meta));
  }
  if (!images.empty()) {
    result.tensors.emplace_back("pixel_values", ConcatRows(image_pixels, "pixel_values"));
    result.tensors.emplace_back("image_grid_thw", GridTensor(images));
  }
  if (!videos.empty()) {
    result.tensors.emplace_back("pixel_values_videos",
                                ConcatRows(video_pixels, "pixel_values_videos"));
    result.tensors.emplace_back("video_grid_thw", GridTensor(videos));
    HostTensor ts(DType::kF64, {static_cast<int64_t>(timestamps.size())});
    if (!timestamps.empty()) std::memcpy(ts.data(), timestamps.data(), ts.nbytes());
    result.tensors.emplace_back("video_timestamps", std::move(ts));
  }
  result.items = std::move(items);
  return result;
}

std::string EncodeSafetensors(const PreprocessResult& result) {
  return SerializeSafetensors(
      result.tensors, {{"format", "m3-preprocess-v1"}, {"items", result.item_metadata.dump()}});
}

json EncodeJson(const PreprocessResult& result) {
  json tensors = json::object();
  for (const auto& [name, t] : result.tensors) {
    tensors[name] = {{"dtype", DTypeName(t.dtype())},
                     {"shape", t.shape()},
                     {"data", Base64Encode(std::string_view(reinterpret_cast<const char*>(t.data()),
                                                            t.nbytes()))}};
  }
  return {{"tensors", tensors}, {"items", result.item_metadata}};
}

}  // namespace m3::net
