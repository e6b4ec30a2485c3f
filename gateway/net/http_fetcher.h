// GET over http:// and https:// for media, with the SSRF guard applied to every hop: the host
// is resolved once, each address is checked, and the connection goes only to checked
// addresses. Redirects (at most FetchOptions::max_redirects, loops refused) are re-checked the
// same way. The body is streamed with a hard byte limit (Content-Length checked first) and
// every step runs under the connect and total deadlines on a private io_context, so a fetch
// can never hang or grow without bound. Safe to call from many threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/net/fetch_options.h"
#include "gateway/net/ssrf_guard.h"

namespace boost::asio::ssl {
class context;
}

namespace m3::net {

class HttpFetcher {
 public:
  HttpFetcher(const FetchOptions& options, std::shared_ptr<const SsrfGuard> guard);

  // The body of a 2xx response. Errors (m3::Error): kPermissionDenied (SSRF guard, https to
  // http downgrade), kTooLarge (over max_bytes), kDeadlineExceeded (timeouts),
  // kUnavailable (connection/TLS failures, 5xx), kInvalidArgument (bad URL, redirect loop or
  // too many redirects, 4xx from the server).
  // `deadline`, when set, ends the fetch earlier than its own total timeout would.
  std::string Get(std::string_view url, int64_t max_bytes,
                  std::optional<std::chrono::steady_clock::time_point> deadline = {}) const;

 private:
  FetchOptions options_;
  std::shared_ptr<const SsrfGuard> guard_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
};

}  // namespace m3::net
