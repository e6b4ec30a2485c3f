// The preprocessing pipeline and its output encodings (see preprocess_service.h).
#include "gateway/preprocess/preprocess_service.h"

#include <cstring>

#include "gateway/net/api_error.h"
#include "gateway/net/base64.h"
#include "gateway/net/url.h"

namespace m3::preprocess {
namespace {

using nlohmann::json;

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

PreprocessService::PreprocessService(std::shared_ptr<const net::MediaFetcher> fetcher,
                                     std::shared_ptr<const media::MediaPreprocessor> preprocessor,
                                     PreprocessLimits limits,
                                     std::shared_ptr<net::MemoryBudget> memory)
    : fetcher_(std::move(fetcher)),
      preprocessor_(std::move(preprocessor)),
      limits_(limits),
      memory_(std::move(memory)) {}

net::MemoryBudget::Reservation PreprocessService::OpenReservation() const {
  return memory_ ? memory_->Open() : net::MemoryBudget::Reservation();
}

void PreprocessService::Admit(const PreprocessRequest& request) const {
  const int64_t items = static_cast<int64_t>(request.items.size());
  if (items > limits_.max_items) {
    throw net::ParamError(ErrorCode::kInvalidArgument,
                          "the request has " + std::to_string(items) +
                              " media items, over this server's limit of " +
                              std::to_string(limits_.max_items) + " per request",
                          "content");
  }
  for (const auto& [value, name] : {std::pair{request.options.max_pixels, "max_pixels"},
                                    std::pair{request.options.min_pixels, "min_pixels"}}) {
    if (value && *value > limits_.max_pixels) {
      throw net::ParamError(ErrorCode::kInvalidArgument,
                            std::string("'") + name + "' of " + std::to_string(*value) +
                                " is over this server's limit of " +
                                std::to_string(limits_.max_pixels) + " pixels per request",
                            name);
    }
  }
  for (const auto& ref : request.items) {
    try {
      if (ref.bytes) {
        const int64_t limit = ref.kind == content::MediaKind::kImage
                                  ? fetcher_->options().max_image_bytes
                                  : fetcher_->options().max_video_bytes;
        if (static_cast<int64_t>(ref.bytes->size()) > limit) {
          throw Error(ErrorCode::kTooLarge, "inline media of " + std::to_string(ref.bytes->size()) +
                                                " bytes is over the limit of " +
                                                std::to_string(limit));
        }
        if (ref.bytes->empty()) throw Error(ErrorCode::kInvalidArgument, "inline media is empty");
      } else {
        fetcher_->Precheck(ref.url, ref.kind);
      }
    } catch (const net::ParamError&) {
      throw;
    } catch (const Error& e) {
      throw net::ParamError(e.code(), ref.param + ": " + e.what(), ref.param);
    }
  }
}

bool PreprocessService::NeedsNetwork(const PreprocessRequest& request) {
  for (const auto& ref : request.items) {
    if (ref.bytes) continue;
    const std::string scheme = net::UrlScheme(ref.url);
    if (scheme == "http" || scheme == "https") return true;
  }
  return false;
}

std::vector<net::FetchedMedia> PreprocessService::FetchAll(
    PreprocessRequest& request, Clock::time_point deadline,
    net::MemoryBudget::Reservation* held) const {
  net::ByteBudget budget(fetcher_->options().max_request_bytes);
  RequestCharges charges(held);
  std::vector<net::FetchedMedia> fetched;
  fetched.reserve(request.items.size());
  for (auto& ref : request.items) {
    try {
      if (Clock::now() >= deadline) {
        throw Error(ErrorCode::kDeadlineExceeded,
                    "the request's time limit of " +
                        std::to_string(limits_.request_timeout.count()) +
                        " ms for fetching media ran out before this item");
      }
      net::FetchedMedia item =
          ref.bytes ? fetcher_->FromBytes(std::move(*ref.bytes), ref.kind, &budget, ref.param)
                    : fetcher_->Fetch(ref.url, ref.kind, &budget, deadline);
      if (ref.bytes) ref.bytes->clear();
      if (net::UrlScheme(ref.url) == "data") std::string().swap(ref.url);  // decoded: drop the text
      ChargeFetched(charges, static_cast<int64_t>(item.bytes.size()));
      fetched.push_back(std::move(item));
    } catch (const net::ParamError&) {
      throw;
    } catch (const Error& e) {
      throw net::ParamError(e.code(), ref.param + ": " + e.what(), ref.param);
    }
  }
  return fetched;
}

void PreprocessService::ChargeFetched(RequestCharges& charges, int64_t bytes) const {
  std::lock_guard lock(charges.mu);
  if (charges.held && !charges.held->TryGrow(bytes)) {
    throw Error(ErrorCode::kResourceExhausted,
                "the server is busy: media in flight would exceed its memory budget of " +
                    std::to_string(memory_ ? memory_->limit() : 0) + " bytes; retry later");
  }
}

media::PreprocessedMedia PreprocessService::ProcessItem(const content::MediaRef& ref,
                                                        const media::MediaOptions& options,
                                                        std::string& bytes,
                                                        RequestCharges& charges) const {
  const media::OutputCheck check = [&](int64_t item_pixels, int64_t item_bytes) {
    std::lock_guard lock(charges.mu);
    charges.pixels += item_pixels;
    charges.bytes += item_bytes;
    if (charges.pixels > limits_.max_pixels) {
      throw Error(ErrorCode::kTooLarge,
                  "the request's media resize to " + std::to_string(charges.pixels) +
                      " pixels, over this server's limit of " + std::to_string(limits_.max_pixels) +
                      " per request (lower max_pixels or max_frames, or send fewer items)");
    }
    if (charges.bytes > limits_.max_output_bytes) {
      throw Error(ErrorCode::kTooLarge,
                  "the request's output tensors would take " + std::to_string(charges.bytes) +
                      " bytes, over this server's limit of " +
                      std::to_string(limits_.max_output_bytes) +
                      " (lower max_pixels or max_frames, or send fewer items)");
    }
    // The item's tensor, its concatenated copy and the encoded response can coexist.
    if (charges.held && !charges.held->TryGrow(2 * item_bytes)) {
      throw Error(ErrorCode::kResourceExhausted,
                  "the server is busy: outputs in flight would exceed its memory budget of " +
                      std::to_string(memory_ ? memory_->limit() : 0) + " bytes; retry later");
    }
  };
  try {
    media::PreprocessedMedia item = ref.kind == content::MediaKind::kImage
                                        ? preprocessor_->ProcessImage(bytes, options, check)
                                        : preprocessor_->ProcessVideo(bytes, options, check);
    std::string().swap(bytes);
    return item;
  } catch (const net::ParamError&) {
    throw;
  } catch (const Error& e) {
    throw net::ParamError(e.code(), ref.param + ": " + e.what(), ref.param);
  }
}

PreprocessResult PreprocessService::Process(const PreprocessRequest& request,
                                            std::vector<net::FetchedMedia> fetched,
                                            net::MemoryBudget::Reservation* held) const {
  Require(fetched.size() == request.items.size(), ErrorCode::kInternal,
          "preprocess: fetched items do not match the request");
  RequestCharges charges(held);
  std::vector<media::PreprocessedMedia> items;
  items.reserve(request.items.size());
  for (size_t i = 0; i < request.items.size(); ++i) {
    items.push_back(ProcessItem(request.items[i], request.options, fetched[i].bytes, charges));
  }
  return GatherResults(std::move(items));
}

PreprocessResult PreprocessService::Run(PreprocessRequest request) const {
  Admit(request);
  net::MemoryBudget::Reservation held = OpenReservation();
  std::vector<net::FetchedMedia> fetched =
      FetchAll(request, Clock::now() + limits_.request_timeout, &held);
  return Process(request, std::move(fetched), &held);
}

PreprocessResult GatherResults(std::vector<media::PreprocessedMedia> items) {
  PreprocessResult result;
  std::vector<const media::PreprocessedMedia*> images, videos;
  std::vector<const HostTensor*> image_pixels, video_pixels;
  std::vector<double> timestamps;
  result.item_metadata = json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& m = items[i];
    bool image = m.kind == content::MediaKind::kImage;
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
  for (auto& m : items) m.pixel_values = HostTensor();
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
                     {"data", net::Base64Encode(std::string_view(
                                  reinterpret_cast<const char*>(t.data()), t.nbytes()))}};
  }
  return {{"tensors", tensors}, {"items", result.item_metadata}};
}

}  // namespace m3::preprocess
