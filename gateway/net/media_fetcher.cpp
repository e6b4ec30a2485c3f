// Media reference dispatch and verification (see media_fetcher.h).
#include "gateway/net/media_fetcher.h"

#include <algorithm>

#include <boost/asio/ip/address.hpp>

#include "gateway/net/base64.h"
#include "gateway/net/data_uri.h"
#include "gateway/net/url.h"
#include "shared/error.h"

namespace m3::net {

using content::MediaKind;
using content::MediaKindName;
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

MediaFetcher::MediaFetcher(const FetchOptions& options, std::shared_ptr<FetchContext> context)
    : options_(options),
      guard_(MakeGuard(options)),
      local_(options.local_media_dirs),
      http_(options, guard_, std::move(context)) {}

bool MediaFetcher::IsRemote(std::string_view ref) {
  const std::string scheme = UrlScheme(ref);
  return scheme == "http" || scheme == "https";
}

int64_t MediaFetcher::LimitFor(MediaKind kind, const ByteBudget* budget) const {
  int64_t limit = kind == MediaKind::kImage ? options_.max_image_bytes : options_.max_video_bytes;
  if (budget) limit = std::min(limit, std::max<int64_t>(budget->remaining(), 0));
  return limit;
}

void MediaFetcher::Precheck(std::string_view ref, MediaKind expected) const {
  if (ref.empty()) throw Error(ErrorCode::kInvalidArgument, "empty media URL");
  const int64_t limit = LimitFor(expected, nullptr);
  const std::string scheme = UrlScheme(ref);
  if (scheme == "data") {
    const DataUriHeader header = ParseDataUriHeader(ref);
    const std::string_view payload = ref.substr(header.payload_offset);
    const int64_t estimate = DataUriDecodedEstimate(header, payload.size());
    if (estimate > limit) {
      throw Error(ErrorCode::kTooLarge, "data: URI payload is about " + std::to_string(estimate) +
                                            " bytes, over the limit of " + std::to_string(limit));
    }
    // Bad base64 is found here in one pass without allocating (percent-escaped base64 is
    // checked when it is decoded).
    if (header.base64 && payload.find('%') == std::string_view::npos) {
      Base64Check(payload, "base64 in data: URI");
    }
    return;
  }
  if (scheme == "http" || scheme == "https") {
    const Url url = ParseHttpUrl(ref);
    boost::system::error_code ec;
    const auto literal = boost::asio::ip::make_address(url.host, ec);
    if (!ec) {
      guard_->Check(url.host, url.port, literal);
    } else if (url.host == "localhost" ||
               (url.host.size() > 10 && url.host.ends_with(".localhost"))) {
      // RFC 6761: these names are loopback whatever DNS says.
      guard_->Check(url.host, url.port, boost::asio::ip::address_v4::loopback());
    }
    return;
  }
  if (LocalMediaPolicy::IsLocalReference(ref)) {
    (void)local_.Resolve(ref);
    return;
  }
  throw Error(ErrorCode::kInvalidArgument,
              scheme.empty()
                  ? "media URL '" + Shorten(ref) + "' has no scheme (expected http, https or data)"
                  : "unsupported media URL scheme '" + scheme + "'");
}

FetchedMedia MediaFetcher::Fetch(
    std::string_view ref, MediaKind expected, ByteBudget* budget,
    std::optional<std::chrono::steady_clock::time_point> deadline) const {
  if (ref.empty()) throw Error(ErrorCode::kInvalidArgument, "empty media URL");
  int64_t limit = LimitFor(expected, budget);
  std::string scheme = UrlScheme(ref);
  if (scheme == "data") {
    DataUri uri = ParseDataUri(ref, limit);
    return Verify(std::move(uri.bytes), expected, budget, "data: URI (" + uri.media_type + ")");
  }
  if (scheme == "http" || scheme == "https") {
    return Verify(http_.Get(ref, limit, deadline), expected, budget, Shorten(ref));
  }
  if (LocalMediaPolicy::IsLocalReference(ref)) {
    return Verify(local_.ReadFile(ref, limit), expected, budget, Shorten(ref));
  }
  throw Error(ErrorCode::kInvalidArgument,
              scheme.empty()
                  ? "media URL '" + Shorten(ref) + "' has no scheme (expected http, https or data)"
                  : "unsupported media URL scheme '" + scheme + "'");
}

void MediaFetcher::FetchAsync(std::string ref, MediaKind expected,
                              std::shared_ptr<SharedByteBudget> budget,
                              std::optional<std::chrono::steady_clock::time_point> deadline,
                              FetchDone done) const {
  const int64_t kind_limit =
      expected == MediaKind::kImage ? options_.max_image_bytes : options_.max_video_bytes;
  if (!IsRemote(ref)) {
    FetchedMedia media;
    try {
      ByteBudget local(budget ? std::min(budget->remaining(), kind_limit) : kind_limit);
      media = Fetch(ref, expected, &local, deadline);
      if (budget) {
        budget->Charge(static_cast<int64_t>(media.bytes.size()),
                       media.source + " (" + std::to_string(media.bytes.size()) + " bytes)");
      }
    } catch (...) {
      return done(std::current_exception(), {});
    }
    return done(nullptr, std::move(media));
  }
  const int64_t limit = budget ? std::min(kind_limit, budget->total()) : kind_limit;
  std::string source = Shorten(ref);
  http_.GetAsync(std::move(ref), limit, deadline, std::move(budget),
                 [expected, source = std::move(source), done = std::move(done)](
                     std::exception_ptr error, std::string body) {
                   if (error) return done(error, {});
                   FetchedMedia media;
                   try {
                     media = VerifyBytes(std::move(body), expected, source);
                   } catch (...) {
                     return done(std::current_exception(), {});
                   }
                   done(nullptr, std::move(media));
                 });
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
  FetchedMedia media = VerifyBytes(std::move(bytes), expected, std::move(source));
  if (budget) budget->Consume(static_cast<int64_t>(media.bytes.size()));
  return media;
}

FetchedMedia MediaFetcher::VerifyBytes(std::string bytes, MediaKind expected, std::string source) {
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
  return {std::move(bytes), format, std::move(source)};
}

}  // namespace m3::net
