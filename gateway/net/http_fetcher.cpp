// The http(s) media client (see http_fetcher.h). One coroutine per fetch on a private
// io_context; the tcp_stream deadlines bound every network operation, ResolveHost bounds DNS,
// and run_until bounds the whole fetch.
#include "gateway/net/http_fetcher.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <set>
#include <utility>  // before asio: Boost 1.74 awaitable.hpp uses std::exchange unincluded
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "gateway/net/host_resolver.h"
#include "gateway/net/tls_context.h"
#include "gateway/net/url.h"
#include "shared/error.h"

namespace m3::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Hop {
  int status = 0;
  std::string location;  // for redirects
  std::string body;      // for 2xx
};

bool IsRedirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// Tracks what a fetch was doing so a low-level error becomes a message that names the step.
struct Progress {
  std::string url;
  const char* stage = "starting";
};

template <class Stream>
asio::awaitable<Hop> Exchange(Stream& stream, const Url& url, const FetchOptions& options,
                              int64_t max_bytes, Progress& progress) {
  progress.stage = "sending the request";
  http::request<http::empty_body> req{http::verb::get, url.target, 11};
  req.set(http::field::host, url.HostForHeader());
  req.set(http::field::user_agent, options.user_agent);
  req.set(http::field::accept, "*/*");
  req.set(http::field::connection, "close");
  co_await http::async_write(stream, req, asio::use_awaitable);

  progress.stage = "reading the response header";
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(static_cast<uint64_t>(std::max<int64_t>(max_bytes, 0)));
  bool over_limit = false;
  try {
    co_await http::async_read_header(stream, buffer, parser, asio::use_awaitable);
  } catch (const boost::system::system_error& e) {
    // Beast compares Content-Length with the body limit as soon as the header is parsed.
    if (e.code() != http::error::body_limit) throw;
    over_limit = true;
  }
  if (over_limit) {
    throw Error(ErrorCode::kTooLarge, "media at " + url.ToString() + " declares " +
                                          std::to_string(parser.content_length().value_or(0)) +
                                          " bytes, over the limit of " + std::to_string(max_bytes));
  }

  Hop hop;
  hop.status = static_cast<int>(parser.get().result_int());
  if (IsRedirect(hop.status)) {
    auto it = parser.get().find(http::field::location);
    if (it == parser.get().end()) {
      throw Error(ErrorCode::kUnavailable, "redirect from " + url.ToString() + " has no Location");
    }
    hop.location = std::string(it->value());
    co_return hop;
  }
  if (hop.status < 200 || hop.status >= 300) {
    throw Error(hop.status >= 500 ? ErrorCode::kUnavailable : ErrorCode::kInvalidArgument,
                "fetching " + url.ToString() + " failed: the server answered HTTP " +
                    std::to_string(hop.status));
  }
  if (auto length = parser.content_length(); length && *length > static_cast<uint64_t>(max_bytes)) {
    throw Error(ErrorCode::kTooLarge, "media at " + url.ToString() + " is " +
                                          std::to_string(*length) + " bytes, over the limit of " +
                                          std::to_string(max_bytes));
  }
  progress.stage = "reading the response body";
  try {
    co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
  } catch (const boost::system::system_error& e) {
    if (e.code() == http::error::body_limit) {
      throw Error(ErrorCode::kTooLarge, "media at " + url.ToString() + " is over the limit of " +
                                            std::to_string(max_bytes) + " bytes");
    }
    throw;
  }
  hop.body = parser.release().body();
  co_return hop;
}

asio::awaitable<Hop> FetchHop(const Url& url, const FetchOptions& options, const SsrfGuard& guard,
                              asio::ssl::context& tls, int64_t max_bytes,
                              Clock::time_point deadline, Progress& progress) {
  auto executor = co_await asio::this_coro::executor;
  progress.url = url.ToString();

  // Resolve once; the addresses checked here are the only ones we connect to.
  std::vector<tcp::endpoint> endpoints;
  boost::system::error_code parse_ec;
  auto literal = asio::ip::make_address(url.host, parse_ec);
  if (!parse_ec) {
    endpoints.emplace_back(literal, url.port);
  } else {
    if (url.ipv6_literal)
      throw Error(ErrorCode::kInvalidArgument, "malformed IPv6 literal in " + url.ToString());
    if (url.host == "localhost" || (url.host.size() > 10 && url.host.ends_with(".localhost"))) {
      // RFC 6761: these names are loopback whatever the resolver says (or when it knows none).
      endpoints.emplace_back(asio::ip::address_v4::loopback(), url.port);
      endpoints.emplace_back(asio::ip::address_v6::loopback(), url.port);
    } else {
      progress.stage = "resolving the host";
      endpoints = co_await ResolveHost(url.host, url.port, deadline);
    }
  }
  std::vector<tcp::endpoint> allowed;
  for (const auto& ep : endpoints) {
    if (guard.Allows(url.host, url.port, ep.address())) allowed.push_back(ep);
  }
  if (allowed.empty()) {
    if (endpoints.empty())
      throw Error(ErrorCode::kUnavailable, "host " + url.host + " has no addresses");
    guard.Check(url.host, url.port, endpoints.front().address());  // throws with the reason
  }

  progress.stage = "connecting";
  beast::tcp_stream tcp(executor);
  tcp.expires_at(std::min(Clock::now() + options.connect_timeout, deadline));
  co_await tcp.async_connect(allowed, asio::use_awaitable);
  tcp.expires_at(deadline);

  if (!url.https()) co_return co_await Exchange(tcp, url, options, max_bytes, progress);

  asio::ssl::stream<beast::tcp_stream&> tls_stream(tcp, tls);
  ConfigureTlsHost(tls_stream.native_handle(), url.host, url.ipv6_literal || !parse_ec);
  progress.stage = "TLS handshake";
  co_await tls_stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
  co_return co_await Exchange(tls_stream, url, options, max_bytes, progress);
}

asio::awaitable<std::string> FetchWithRedirects(std::string url_text, const FetchOptions& options,
                                                const SsrfGuard& guard, asio::ssl::context& tls,
                                                int64_t max_bytes, Clock::time_point deadline,
                                                Progress& progress) {
  Url url = ParseHttpUrl(url_text);
  std::set<std::string> seen{url.ToString()};
  for (int redirects = 0;; ++redirects) {
    Hop hop = co_await FetchHop(url, options, guard, tls, max_bytes, deadline, progress);
    if (!IsRedirect(hop.status)) co_return std::move(hop.body);
    Url next = ResolveRedirect(url, hop.location);
    if (url.https() && !next.https()) {
      throw Error(ErrorCode::kPermissionDenied,
                  "refusing redirect from https to http: " + next.ToString());
    }
    if (!seen.insert(next.ToString()).second) {
      throw Error(ErrorCode::kInvalidArgument, "redirect loop while fetching " +
                                                   url_text.substr(0, 200) + " (back to " +
                                                   next.ToString() + ")");
    }
    if (redirects + 1 > options.max_redirects) {
      throw Error(ErrorCode::kInvalidArgument, "too many redirects (over " +
                                                   std::to_string(options.max_redirects) +
                                                   ") while fetching " + url_text.substr(0, 200));
    }
    url = std::move(next);
  }
}

}  // namespace

HttpFetcher::HttpFetcher(const FetchOptions& options, std::shared_ptr<const SsrfGuard> guard)
    : options_(options), guard_(std::move(guard)), tls_(MakeClientTlsContext(options)) {}

std::string HttpFetcher::Get(std::string_view url, int64_t max_bytes,
                             std::optional<Clock::time_point> request_deadline) const {
  asio::io_context ioc(1);
  auto deadline = Clock::now() + options_.total_timeout;
  const bool request_bound = request_deadline && *request_deadline < deadline;
  if (request_bound) deadline = *request_deadline;
  if (deadline <= Clock::now()) {
    throw Error(ErrorCode::kDeadlineExceeded,
                "the request's time for fetching media ran out before " +
                    std::string(url.substr(0, 200)) + " was fetched");
  }
  Progress progress;
  progress.url = std::string(url.substr(0, 200));
  std::optional<std::string> body;
  std::exception_ptr failure;
  asio::co_spawn(
      ioc,
      FetchWithRedirects(std::string(url), options_, *guard_, *tls_, max_bytes, deadline, progress),
      [&](std::exception_ptr e, std::string result) {
        if (e)
          failure = e;
        else
          body = std::move(result);
      });
  // The stream deadlines end every socket operation; this bounds DNS as well.
  ioc.run_until(deadline + std::chrono::milliseconds(200));
  bool timed_out = Clock::now() >= deadline;
  if (body) return std::move(*body);
  std::string where = std::string(progress.stage) + " for " + progress.url;
  if (!failure || timed_out) {
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kUnavailable) throw;
      } catch (...) {
      }
    }
    throw Error(
        ErrorCode::kDeadlineExceeded,
        request_bound
            ? "the request's time for fetching media ran out while " + where
            : "timed out after " + std::to_string(options_.total_timeout.count()) + " ms " + where);
  }
  try {
    std::rethrow_exception(failure);
  } catch (const Error&) {
    throw;
  } catch (const boost::system::system_error& e) {
    auto ec = e.code();
    if (ec == beast::error::timeout) {
      throw Error(ErrorCode::kDeadlineExceeded, "timed out " + where);
    }
    std::string reason = ec.message();
    if (ec.category() == asio::error::get_ssl_category()) reason = "TLS error: " + reason;
    throw Error(ErrorCode::kUnavailable, "failed " + where + ": " + reason);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kUnavailable, "failed " + where + ": " + e.what());
  }
}

}  // namespace m3::net
