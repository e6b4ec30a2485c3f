// GET over http:// and https:// for media, with the SSRF guard applied to every hop: the host
// is resolved once, each address is checked, and the connection goes only to checked
// addresses. Redirects (at most FetchOptions::max_redirects, loops refused) are re-checked the
// same way. The body is streamed with a hard byte limit (Content-Length checked first) and
// every step runs under the connect and total deadlines. Each fetch is a coroutine on the
// process's shared FetchContext (its own strand), so a fetch never holds a thread while it
// waits; Get is the blocking form for callers that have a thread to spare. Safe to use from
// many threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/net/fetch_context.h"
#include "gateway/net/fetch_options.h"
#include "gateway/net/shared_byte_budget.h"
#include "gateway/net/ssrf_guard.h"

namespace m3::net {

class HttpFetcher {
 public:
  // With no `context`, the fetcher makes its own from `options`.
  HttpFetcher(const FetchOptions& options, std::shared_ptr<const SsrfGuard> guard,
              std::shared_ptr<FetchContext> context = nullptr);

  // The body of a 2xx response. Errors (m3::Error): kPermissionDenied (SSRF guard, https to
  // http downgrade), kTooLarge (over max_bytes), kDeadlineExceeded (timeouts),
  // kUnavailable (connection/TLS failures, 5xx), kInvalidArgument (bad URL, redirect loop or
  // too many redirects, 4xx from the server), kResourceExhausted (too many fetches or DNS
  // lookups in flight).
  // `deadline`, when set, ends the fetch earlier than its own total timeout would.
  // Blocks the calling thread; never call it from a FetchContext thread.
  std::string Get(std::string_view url, int64_t max_bytes,
                  std::optional<std::chrono::steady_clock::time_point> deadline = {}) const;

  // `done(error, body)` is called exactly once, on a network thread (keep it short: hand CPU
  // work to a pool), with the body or an m3::Error as Get would throw. `budget`, when given, is
  // charged as the body arrives. The fetcher may go away before `done` runs; the context
  // must not.
  using Done = std::function<void(std::exception_ptr error, std::string body)>;
  void GetAsync(std::string url, int64_t max_bytes,
                std::optional<std::chrono::steady_clock::time_point> deadline,
                std::shared_ptr<SharedByteBudget> budget, Done done) const;

  const std::shared_ptr<FetchContext>& context() const { return context_; }

  struct Config;

 private:
  std::shared_ptr<const Config> config_;
  std::shared_ptr<FetchContext> context_;
};

}  // namespace m3::net
