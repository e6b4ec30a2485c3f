// MediaFetcher: turns a media reference from a request (http(s) URL, data: URI, file:// URL
// or absolute path) into verified encoded bytes: within the per-kind and per-request byte
// limits, allowed by the SSRF guard / local-file policy, non-empty, and of the expected kind
// according to the magic bytes. Thread-safe; one instance serves the whole process, and its
// http(s) fetches run on one FetchContext (shared network threads, bounded DNS), blocking
// (Fetch) or not (FetchAsync).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/content/media_kind.h"
#include "gateway/net/fetch_options.h"
#include "gateway/net/http_fetcher.h"
#include "gateway/net/local_media.h"
#include "gateway/net/media_sniffer.h"
#include "gateway/net/shared_byte_budget.h"
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
  // With no `context`, the fetcher makes its own (its threads live as long as the fetcher).
  explicit MediaFetcher(const FetchOptions& options,
                        std::shared_ptr<FetchContext> context = nullptr);

  const FetchOptions& options() const { return options_; }
  // Throws m3::Error: kInvalidArgument (malformed reference, bad base64, empty media),
  // kTooLarge, kUnsupported (not an image/video, or the other kind than expected),
  // kPermissionDenied (SSRF guard, local-file policy), kDeadlineExceeded, kUnavailable,
  // kNotFound (local file missing).
  // `deadline` (when set) bounds this fetch in addition to its own total timeout: a request's
  // fetches share one deadline.
  // Blocks the calling thread; never call it from a FetchContext thread.
  FetchedMedia Fetch(std::string_view ref, content::MediaKind expected, ByteBudget* budget,
                     std::optional<std::chrono::steady_clock::time_point> deadline = {}) const;
  // Fetch without holding a thread: `done(error, media)` is called exactly once with what
  // Fetch would return or throw. http(s) references are fetched on the FetchContext and
  // `done` runs on one of its network threads (keep it short; hand decoding to a pool);
  // data: URIs and local files are read on the calling thread, which also runs `done`, so
  // call it for those from a thread that may do that work. `budget` (one per request, shared
  // by its items, may be null) is charged as bytes arrive. The fetcher may go away before
  // `done` runs.
  using FetchDone = std::function<void(std::exception_ptr error, FetchedMedia media)>;
  void FetchAsync(std::string ref, content::MediaKind expected,
                  std::shared_ptr<SharedByteBudget> budget,
                  std::optional<std::chrono::steady_clock::time_point> deadline,
                  FetchDone done) const;
  // Whether the reference is fetched over the network (http or https).
  static bool IsRemote(std::string_view ref);
  // The checks that need no I/O beyond a stat: scheme, URL syntax, the SSRF guard for IP
  // literals and local hosts, data: URI header and declared size, the local-file policy.
  // Run before a request is queued so that what can be refused at once never waits; throws
  // what Fetch would.
  void Precheck(std::string_view ref, content::MediaKind expected) const;
  // The same checks for bytes that came inline (e.g. gRPC bytes fields).
  FetchedMedia FromBytes(std::string bytes, content::MediaKind expected, ByteBudget* budget,
                         std::string source) const;

 private:
  int64_t LimitFor(content::MediaKind kind, const ByteBudget* budget) const;
  FetchedMedia Verify(std::string bytes, content::MediaKind expected, ByteBudget* budget,
                      std::string source) const;
  static FetchedMedia VerifyBytes(std::string bytes, content::MediaKind expected,
                                  std::string source);

  FetchOptions options_;
  std::shared_ptr<const SsrfGuard> guard_;
  LocalMediaPolicy local_;
  HttpFetcher http_;
};

}  // namespace m3::net
