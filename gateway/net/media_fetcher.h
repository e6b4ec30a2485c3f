// MediaFetcher: turns a media reference from a request (http(s) URL, data: URI, file:// URL
// or absolute path) into verified encoded bytes: within the per-kind and per-request byte
// limits, allowed by the SSRF guard / local-file policy, non-empty, and of the expected kind
// according to the magic bytes. Thread-safe; one instance serves the whole process.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/net/fetch_options.h"
#include "gateway/net/http_fetcher.h"
#include "gateway/net/local_media.h"
#include "gateway/net/media_sniffer.h"
#include "gateway/net/ssrf_guard.h"

namespace m3::net {

// The bytes left for the media of one request; not shared between threads.
class ByteBudget {
 public:
  explicit ByteBudget(int64_t total) : remaining_(total) {}
  int64_t remaining() const { return remaining_; }
  void Consume(int64_t n) { remaining_ -= n; }

 private:
  int64_t remaining_;
};

struct FetchedMedia {
  std::string bytes;
  SniffedFormat format;
  std::string source;  // short description for messages: URL, path or "data: URI (image/png)"
};

class MediaFetcher {
 public:
  explicit MediaFetcher(const FetchOptions& options);

  const FetchOptions& options() const { return options_; }
  // Throws m3::Error: kInvalidArgument (malformed reference, bad base64, empty media),
  // kTooLarge, kUnsupported (not an image/video, or the other kind than expected),
  // kPermissionDenied (SSRF guard, local-file policy), kDeadlineExceeded, kUnavailable,
  // kNotFound (local file missing).
  // `deadline` (when set) bounds this fetch in addition to its own total timeout: a request's
  // fetches share one deadline.
  FetchedMedia Fetch(std::string_view ref, MediaKind expected, ByteBudget* budget,
                     std::optional<std::chrono::steady_clock::time_point> deadline = {}) const;
  // The checks that need no I/O beyond a stat: scheme, URL syntax, the SSRF guard for IP
  // literals and local hosts, data: URI header and declared size, the local-file policy.
  // Run before a request is queued so that what can be refused at once never waits; throws
  // what Fetch would.
  void Precheck(std::string_view ref, MediaKind expected) const;
  // The same checks for bytes that came inline (e.g. gRPC bytes fields).
  FetchedMedia FromBytes(std::string bytes, MediaKind expected, ByteBudget* budget,
                         std::string source) const;

 private:
  int64_t LimitFor(MediaKind kind, const ByteBudget* budget) const;
  FetchedMedia Verify(std::string bytes, MediaKind expected, ByteBudget* budget,
                      std::string source) const;

  FetchOptions options_;
  std::shared_ptr<const SsrfGuard> guard_;
  LocalMediaPolicy local_;
  HttpFetcher http_;
};

}  // namespace m3::net
