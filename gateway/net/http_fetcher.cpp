// The http(s) media client (see http_fetcher.h). One coroutine per fetch on a strand of the
// shared FetchContext; the tcp_stream deadlines bound every network operation and the
// resolver's wait bounds DNS, so every fetch ends by its deadline. What a coroutine uses it
// owns (Config by shared_ptr), so a fetcher may go while its fetches finish.
#include "gateway/net/http_fetcher.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <optional>
#include <set>
#include <utility>  // before asio: Boost 1.74 awaitable.hpp uses std::exchange unincluded
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "gateway/net/tls_context.h"
#include "gateway/net/url.h"
#include "shared/error.h"

namespace m3::net {

struct HttpFetcher::Config {
  FetchOptions options;
  std::shared_ptr<const SsrfGuard> guard;
  std::shared_ptr<boost::asio::ssl::context> tls;
};

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
                              int64_t max_bytes, SharedByteBudget* budget, Progress& progress) {
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
  const auto declared = parser.content_length();
  if (budget && declared) {
    budget->Charge(static_cast<int64_t>(*declared),
                   "media at " + url.ToString() + " (" + std::to_string(*declared) + " bytes)");
  }
  try {
    if (budget && !declared) {
      // No length up front: charge the request's budget as the body streams in, so that
      // items fetched at once never hold more than the request may have.
      int64_t charged = 0;
      while (!parser.is_done()) {
        co_await http::async_read_some(stream, buffer, parser, asio::use_awaitable);
        const auto have = static_cast<int64_t>(parser.get().body().size());
        if (have > charged) {
          budget->Charge(have - charged, "media at " + url.ToString());
          charged = have;
        }
      }
    } else {
      co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
    }
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

asio::awaitable<Hop> FetchHop(const Url& url, const HttpFetcher::Config& config,
                              HostResolver& resolver, int64_t max_bytes, SharedByteBudget* budget,
                              Clock::time_point deadline, Progress& progress) {
  const FetchOptions& options = config.options;
  const SsrfGuard& guard = *config.guard;
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
      endpoints = co_await resolver.Resolve(url.host, url.port, deadline);
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

  if (!url.https()) co_return co_await Exchange(tcp, url, options, max_bytes, budget, progress);

  asio::ssl::stream<beast::tcp_stream&> tls_stream(tcp, *config.tls);
  ConfigureTlsHost(tls_stream.native_handle(), url.host, url.ipv6_literal || !parse_ec);
  progress.stage = "TLS handshake";
  co_await tls_stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
  co_return co_await Exchange(tls_stream, url, options, max_bytes, budget, progress);
}

asio::awaitable<std::string> FetchWithRedirects(const std::string& url_text,
                                                const HttpFetcher::Config& config,
                                                HostResolver& resolver, int64_t max_bytes,
                                                SharedByteBudget* budget,
                                                Clock::time_point deadline, Progress& progress) {
  const FetchOptions& options = config.options;
  Url url = ParseHttpUrl(url_text);
  std::set<std::string> seen{url.ToString()};
  for (int redirects = 0;; ++redirects) {
    Hop hop = co_await FetchHop(url, config, resolver, max_bytes, budget, deadline, progress);
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

// The error a failed fetch reports: m3::Errors as thrown, except that anything at or past the
// deadline is a timeout; socket and TLS errors become messages naming the step.
std::exception_ptr MapFailure(std::exception_ptr failure, const Progress& progress,
                              Clock::time_point deadline, bool request_bound,
                              std::chrono::milliseconds total_timeout) {
  const std::string where = std::string(progress.stage) + " for " + progress.url;
  if (Clock::now() >= deadline) {
    try {
      std::rethrow_exception(failure);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kUnavailable) return failure;
    } catch (...) {
    }
    return std::make_exception_ptr(
        Error(ErrorCode::kDeadlineExceeded,
              request_bound
                  ? "the request's time for fetching media ran out while " + where
                  : "timed out after " + std::to_string(total_timeout.count()) + " ms " + where));
  }
  try {
    std::rethrow_exception(failure);
  } catch (const Error&) {
    return failure;
  } catch (const boost::system::system_error& e) {
    auto ec = e.code();
    if (ec == beast::error::timeout) {
      return std::make_exception_ptr(Error(ErrorCode::kDeadlineExceeded, "timed out " + where));
    }
    std::string reason = ec.message();
    if (ec.category() == asio::error::get_ssl_category()) reason = "TLS error: " + reason;
    return std::make_exception_ptr(
        Error(ErrorCode::kUnavailable, "failed " + where + ": " + reason));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(
        Error(ErrorCode::kUnavailable, "failed " + where + ": " + e.what()));
  }
}

// Counts one fetch against the context's cap for as long as it lives.
class InflightSlot {
 public:
  explicit InflightSlot(std::atomic<int>& count) : count_(count) { count_.fetch_add(1); }
  ~InflightSlot() { count_.fetch_sub(1); }
  InflightSlot(const InflightSlot&) = delete;
  InflightSlot& operator=(const InflightSlot&) = delete;
  int taken() const { return count_.load(); }

 private:
  std::atomic<int>& count_;
};

// One whole fetch, its failures mapped; holds everything it uses.
asio::awaitable<std::string> RunFetch(std::shared_ptr<const HttpFetcher::Config> config,
                                      std::shared_ptr<FetchContext> context, std::string url,
                                      int64_t max_bytes, Clock::time_point deadline,
                                      bool request_bound,
                                      std::shared_ptr<SharedByteBudget> budget) {
  InflightSlot slot(context->inflight());
  if (slot.taken() > context->max_inflight()) {
    throw Error(ErrorCode::kResourceExhausted,
                "the server is busy: " + std::to_string(context->max_inflight()) +
                    " media fetches are already in flight; retry later");
  }
  Progress progress;
  progress.url = url.substr(0, 200);
  std::exception_ptr failure;
  try {
    co_return co_await FetchWithRedirects(url, *config, context->resolver(), max_bytes,
                                          budget.get(), deadline, progress);
  } catch (...) {
    failure = std::current_exception();
  }
  std::rethrow_exception(
      MapFailure(failure, progress, deadline, request_bound, config->options.total_timeout));
}

// The fetch's deadline: its own total timeout, or the request's when that comes first.
struct EffectiveDeadline {
  Clock::time_point at;
  bool request_bound = false;
};
EffectiveDeadline Effective(const FetchOptions& options,
                            std::optional<Clock::time_point> request_deadline) {
  EffectiveDeadline d{Clock::now() + options.total_timeout, false};
  if (request_deadline && *request_deadline < d.at) d = {*request_deadline, true};
  return d;
}

Error OutOfTime(std::string_view url) {
  return Error(ErrorCode::kDeadlineExceeded,
               "the request's time for fetching media ran out before " +
                   std::string(url.substr(0, 200)) + " was fetched");
}

}  // namespace

HttpFetcher::HttpFetcher(const FetchOptions& options, std::shared_ptr<const SsrfGuard> guard,
                         std::shared_ptr<FetchContext> context)
    : config_(std::make_shared<const Config>(
          Config{options, std::move(guard), MakeClientTlsContext(options)})),
      context_(context ? std::move(context)
                       : std::make_shared<FetchContext>(FetchContext::FromFetchOptions(options))) {}

void HttpFetcher::GetAsync(std::string url, int64_t max_bytes,
                           std::optional<Clock::time_point> request_deadline,
                           std::shared_ptr<SharedByteBudget> budget, Done done) const {
  const EffectiveDeadline deadline = Effective(config_->options, request_deadline);
  auto strand = asio::make_strand(context_->io());
  if (deadline.at <= Clock::now()) {
    auto error = std::make_exception_ptr(OutOfTime(url));
    asio::post(strand, [done = std::move(done), error] { done(error, {}); });
    return;
  }
  asio::co_spawn(strand,
                 RunFetch(config_, context_, std::move(url), max_bytes, deadline.at,
                          deadline.request_bound, std::move(budget)),
                 [done = std::move(done)](std::exception_ptr error, std::string body) {
                   done(error, std::move(body));
                 });
}

std::string HttpFetcher::Get(std::string_view url, int64_t max_bytes,
                             std::optional<Clock::time_point> request_deadline) const {
  const EffectiveDeadline deadline = Effective(config_->options, request_deadline);
  if (deadline.at <= Clock::now()) throw OutOfTime(url);
  auto promise = std::make_shared<std::promise<std::string>>();
  std::future<std::string> result = promise->get_future();
  GetAsync(std::string(url), max_bytes, request_deadline, nullptr,
           [promise](std::exception_ptr error, std::string body) {
             if (error) {
               promise->set_exception(error);
             } else {
               promise->set_value(std::move(body));
             }
           });
  // Every step of the fetch ends by the deadline; the margin only guards against a context
  // that is shutting down and will never run the fetch.
  if (result.wait_until(deadline.at + std::chrono::seconds(2)) != std::future_status::ready) {
    throw Error(ErrorCode::kDeadlineExceeded, "timed out fetching " +
                                                  std::string(url.substr(0, 200)) +
                                                  " (the fetch threads did not answer)");
  }
  return result.get();
}

}  // namespace m3::net
