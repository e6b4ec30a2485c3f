// Media reference dispatch and verification (see media_fetcher.h).
#include "gateway/net/media_fetcher.h"

#include <algorithm>

#include "gateway/net/data_uri.h"
#include "gateway/net/url.h"
#include "shared/error.h"

namespace m3::net {
namespace {

std::shared_ptr<const SsrfGuard> MakeGuard(const FetchOptions& options) {
  std::vector<HostRule> rules;
  for (const auto& h : options.allowed_hosts) rules.push_back(ParseHostRule(h));
  return std::make_shared<const SsrfGuard>(options.ssrf_guard, std::move(rules));
}

std::string Shorten(std::string_view s) {
  return s.size() <= 120 ? std::string(s) : std::string(s.substr(0, 117)) + "...";
}

}  // namespace

MediaFetcher::MediaFetcher(const FetchOptions& options)
    : options_(options),
      guard_(MakeGuard(options)),
      local_(options.local_media_dirs),
      http_(options, guard_) {}

int64_t MediaFetcher::LimitFor(MediaKind kind, const ByteBudget* budget) const {
  int64_t limit = kind == MediaKind::kImage ? options_.max_image_bytes : options_.max_video_bytes;
  if (budget) limit = std::min(limit, std::max<int64_t>(budget->remaining(), 0));
  return limit;
}

FetchedMedia MediaFetcher::Fetch(std::string_view ref, MediaKind expected,
                                 ByteBudget* budget) const {
  if (ref.empty()) throw Error(ErrorCode::kInvalidArgument, "empty media URL");
  int64_t limit = LimitFor(expected, budget);
  std::string scheme = UrlScheme(ref);
  if (scheme == "data") {
    DataUri uri = ParseDataUri(ref, limit);
    return Verify(std::move(uri.bytes), expected, budget, "data: URI (" + uri.media_type + ")");
  }
  if (scheme == "http" || scheme == "https") {
    return Verify(http_.Get(ref, limit), expected, budget, Shorten(ref));
  }
  if (LocalMediaPolicy::IsLocalReference(ref)) {
    return Verify(local_.ReadFile(ref, limit), expected, budget, Shorten(ref));
  }
  throw Error(ErrorCode::kInvalidArgument,
              scheme.empty()
                  ? "media URL '" + Shorten(ref) + "' has no scheme (expected http, https or data)"
                  : "unsupported media URL scheme '" + scheme + "'");
}

FetchedMedia MediaFetcher::FromBytes(std::string bytes, MediaKind expected, ByteBudget* budget,
                                     std::string source) const {
  int64_t limit = LimitFor(expected, budget);
  if (static_cast<int64_t>(bytes.size()) > limit) {
    throw Error(ErrorCode::kTooLarge, source + " is " + std::to_string(bytes.size()) +
                                          " bytes, over the limit of " + std::to_string(limit));
  }
  return Verify(std::move(bytes), expected, budget, std::move(source));
}

FetchedMedia MediaFetcher::Verify(std::string bytes, MediaKind expected, ByteBudget* budget,
                                  std::string source) const {
  if (bytes.empty())
    throw Error(ErrorCode::kInvalidArgument, "media from " + source + " is empty (0 bytes)");
  SniffedFormat format = SniffMediaFormat(bytes);
  if (format.kind == SniffedFormat::Kind::kUnknown) {
    throw Error(ErrorCode::kUnsupported,
                "media from " + source + " is not a recognized image or video format");
  }
  bool is_image = format.kind == SniffedFormat::Kind::kImage;
  if (is_image != (expected == MediaKind::kImage)) {
    throw Error(ErrorCode::kUnsupported,
                "expected " + std::string(MediaKindName(expected)) + " but " + source + " is " +
                    (is_image ? "an image (" : "a video (") + std::string(format.name) + ")");
  }
  if (budget) budget->Consume(static_cast<int64_t>(bytes.size()));
  return {std::move(bytes), format, std::move(source)};
}

}  // namespace m3::net
