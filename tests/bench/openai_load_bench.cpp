// m3-bench-openai-load: load on a running OpenAI gateway (`m3-gateway serve`) and its engines,
// on loopback. Two parts:
//  1. The gateway's added latency, paired: PAIRS times, one after another, the same text-only
//     chat request is sent streaming through the gateway and, as the token ids the gateway's
//     /tokenize gives for it, straight to an engine over gRPC (--engine); the differences of
//     time to first token and of time to the last token are the time spent outside the engine.
//     Each pair runs both ways round in turn, one way after the other.
//  2. CLIENTS concurrent streaming clients (Beast, C++20 coroutines, one keep-alive connection
//     each) send chat requests for SECONDS: errors, requests/s, time to first token p50/p99,
//     the gateway's resident memory (VmRSS of --gateway-pid) idle, after a tenth of the run, at
//     the end and its peak, and the gateway's own request setup time (arrival to engine
//     request) from its /metrics histogram over the run.
// Prints a summary and one JSON object. It stops by itself.
//
//   m3-bench-openai-load --port 8000 --engine 127.0.0.1:50051 --gateway-pid PID
//       [--clients 200] [--seconds 120] [--pairs 200] [--max-tokens 16] [--prompt "Hi there"]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "engine.grpc.pb.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct Args {
  int port = 8000;
  std::string engine;  // HOST:PORT; empty: no paired comparison
  int gateway_pid = 0;
  int clients = 200;
  int seconds = 120;
  int pairs = 200;
  int max_tokens = 16;
  std::string prompt = "Hi there";
};

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double at = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

int64_t RssKb(int pid, const char* field) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::atoll(line.c_str() + std::strlen(field));
  }
  return -1;
}

// The outcome of one streamed chat completion as the client saw it.
struct StreamResult {
  int status = 0;
  bool ok = false;        // 200, no error event, ended with [DONE]
  double ttft_ms = NAN;   // request written -> first event carrying content
  double total_ms = NAN;  // request written -> end of the response
  int content_events = 0;
  std::string error;
};

// Scans the SSE bytes received so far for complete events; notes the first content event.
class SseScanner {
 public:
  // Returns true when a new content event was seen.
  void Feed(std::string_view bytes, StreamResult& r, Clock::time_point start) {
    pending_.append(bytes);
    size_t end;
    while ((end = pending_.find("\n\n")) != std::string::npos) {
      std::string event = pending_.substr(0, end);
      pending_.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string_view data = std::string_view(event).substr(6);
      if (data == "[DONE]") {
        done_ = true;
        continue;
      }
      // Parsing every event would make the client the bottleneck; content deltas are found by
      // their key, and the JSON is parsed only for errors.
      if (data.find("\"error\"") != std::string_view::npos && r.error.empty()) {
        r.error = std::string(data.substr(0, 300));
      }
      if (data.find("\"content\":\"") != std::string_view::npos &&
          data.find("\"content\":\"\"") == std::string_view::npos) {
        if (r.content_events++ == 0) r.ttft_ms = Ms(Clock::now() - start);
      }
    }
  }
  bool done() const { return done_; }

 private:
  std::string pending_;
  bool done_ = false;
};

// Sends one streamed chat request on `stream` (connecting first when needed) and reads the whole
// response. Never throws; transport failures close the stream and are reported in the result.
asio::awaitable<StreamResult> StreamChat(beast::tcp_stream& stream, tcp::endpoint endpoint,
                                         const std::string& body) {
  StreamResult r;
  beast::error_code ec;
  if (!stream.socket().is_open()) {
    stream.expires_after(std::chrono::seconds(10));
    co_await stream.async_connect(endpoint, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      r.error = "connect: " + ec.message();
      stream.close();
      co_return r;
    }
    stream.socket().set_option(tcp::no_delay(true));
  }
  http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  const Clock::time_point start = Clock::now();
  stream.expires_after(std::chrono::seconds(300));
  co_await http::async_write(stream, req, asio::redirect_error(asio::use_awaitable, ec));
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (!ec) {
    co_await http::async_read_header(stream, buffer, parser,
                                     asio::redirect_error(asio::use_awaitable, ec));
  }
  SseScanner sse;
  char chunk[16384];
  while (!ec && !parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    co_await http::async_read(stream, buffer, parser,
                              asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    const size_t got = sizeof chunk - parser.get().body().size;
    if (parser.get().result() == http::status::ok) {
      sse.Feed(std::string_view(chunk, got), r, start);
    } else if (r.error.size() < 300) {
      r.error.append(chunk, std::min(got, 300 - r.error.size()));
    }
  }
  r.total_ms = Ms(Clock::now() - start);
  if (ec) {
    r.error = "transport: " + ec.message();
    stream.close();
    co_return r;
  }
  r.status = parser.get().result_int();
  r.ok = r.status == 200 && r.error.empty() && sse.done() && r.content_events > 0;
  if (r.ok) r.error.clear();
  if (!r.ok && r.error.empty()) r.error = sse.done() ? "no content" : "no [DONE]";
  if (!parser.get().keep_alive()) stream.close();
  co_return r;
}

// A blocking HTTP exchange for the setup calls (/v1/models, /tokenize, /metrics).
std::string Call(int port, http::verb verb, const std::string& target, const std::string& body) {
  asio::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read(stream, buffer, parser);
  if (parser.get().result_int() != 200) {
    throw std::runtime_error(target + " answered " + std::to_string(parser.get().result_int()) +
                             ": " + parser.get().body());
  }
  return parser.get().body();
}

// The cumulative bucket counts of one Prometheus histogram: le -> count.
std::map<double, double> HistogramBuckets(const std::string& metrics, const std::string& name) {
  std::map<double, double> out;
  std::istringstream in(metrics);
  std::string line;
  const std::string prefix = name + "_bucket{le=\"";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t q = line.find('"', prefix.size());
    const std::string le = line.substr(prefix.size(), q - prefix.size());
    const double bound = le == "+Inf" ? INFINITY : std::atof(le.c_str());
    out[bound] = std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return out;
}

// The p-th percentile of the observations between two scrapes, interpolated in its bucket.
double HistogramPercentile(const std::map<double, double>& before,
                           const std::map<double, double>& after, double p) {
  std::vector<std::pair<double, double>> cum;
  for (const auto& [le, n] : after) {
    auto it = before.find(le);
    cum.emplace_back(le, n - (it == before.end() ? 0 : it->second));
  }
  if (cum.empty() || cum.back().second <= 0) return NAN;
  const double want = p / 100.0 * cum.back().second;
  double lo_bound = 0, lo_count = 0;
  for (const auto& [le, n] : cum) {
    if (n >= want) {
      if (std::isinf(le)) return lo_bound;
      return lo_bound + (le - lo_bound) * (want - lo_count) / std::max(n - lo_count, 1e-9);
    }
    lo_bound = le;
    lo_count = n;
  }
  return lo_bound;
}

struct Pairs {
  std::vector<double> gw_ttft, gw_total, engine_ttft, engine_total, d_ttft, d_total;
  int errors = 0;
};

// Part 1: the same request through the gateway and straight to the engine, alternately.
Pairs RunPairs(const Args& a, const std::string& model, const std::string& body) {
  Pairs out;
  json tok = json::parse(Call(
      a.port, http::verb::post, "/tokenize",
      json{{"model", model}, {"messages", {{{"role", "user"}, {"content", a.prompt}}}}}.dump()));
  m3::engine::v1::GenerateRequest request;
  for (int id : tok.at("tokens").get<std::vector<int>>()) request.add_token_ids(id);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_tokens(a.max_tokens);
  auto stub = m3::engine::v1::Engine::NewStub(
      grpc::CreateChannel(a.engine, grpc::InsecureChannelCredentials()));
  asio::io_context io;
  beast::tcp_stream stream(io);
  const tcp::endpoint gw(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(a.port));
  // Each pair runs both ways round in turn, so neither path always follows the other.
  for (int i = -5; i < a.pairs; ++i) {  // five warm-up pairs
    StreamResult g;
    const auto via_gateway = [&] {
      asio::co_spawn(
          io, [&]() -> asio::awaitable<void> { g = co_await StreamChat(stream, gw, body); },
          asio::detached);
      io.restart();
      io.run();
    };
    double ttft = NAN, total = NAN;
    grpc::Status st;
    const auto direct = [&] {
      request.set_request_id("bench-" + std::to_string(i));
      grpc::ClientContext ctx;
      const Clock::time_point start = Clock::now();
      auto reader = stub->Generate(&ctx, request);
      m3::engine::v1::GenerateResponse msg;
      while (reader->Read(&msg)) {
        if (std::isnan(ttft) && msg.token_ids_size() > 0) ttft = Ms(Clock::now() - start);
      }
      total = Ms(Clock::now() - start);
      st = reader->Finish();
    };
    if (i % 2 == 0) {
      via_gateway();
      direct();
    } else {
      direct();
      via_gateway();
    }
    if (!g.ok || !st.ok() || std::isnan(ttft)) {
      ++out.errors;
      std::fprintf(stderr, "pair %d failed: gateway %d %s / engine %s\n", i, g.status,
                   g.error.c_str(), st.error_message().c_str());
      continue;
    }
    if (i < 0) continue;
    out.gw_ttft.push_back(g.ttft_ms);
    out.gw_total.push_back(g.total_ms);
    out.engine_ttft.push_back(ttft);
    out.engine_total.push_back(total);
    out.d_ttft.push_back(g.ttft_ms - ttft);
    out.d_total.push_back(g.total_ms - total);
  }
  return out;
}

struct Load {
  std::vector<double> ttft, total;
  int64_t requests = 0, errors = 0;
  std::map<std::string, int64_t> error_kinds;
  int64_t rss_start_kb = -1, rss_warm_kb = -1, rss_end_kb = -1, rss_peak_kb = -1;
  double seconds = 0;
  double setup_p50_ms = NAN, setup_p99_ms = NAN;
};

// Part 2: CLIENTS streaming clients for SECONDS.
Load RunLoad(const Args& a, const std::string& body) {
  Load out;
  const std::string setup_metric = "m3_gateway_request_setup_seconds";
  const auto before = HistogramBuckets(Call(a.port, http::verb::get, "/metrics", ""), setup_metric);
  out.rss_start_kb = RssKb(a.gateway_pid, "VmRSS:");
  out.rss_peak_kb = out.rss_start_kb;
  asio::io_context io;
  const tcp::endpoint gw(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(a.port));
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::seconds(a.seconds);
  const auto warm_up = std::chrono::seconds(std::max(1, a.seconds / 10));
  for (int c = 0; c < a.clients; ++c) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          beast::tcp_stream stream(co_await asio::this_coro::executor);
          while (Clock::now() < deadline) {
            StreamResult r = co_await StreamChat(stream, gw, body);
            ++out.requests;
            if (r.ok) {
              out.ttft.push_back(r.ttft_ms);
              out.total.push_back(r.total_ms);
            } else {
              ++out.errors;
              ++out.error_kinds[std::to_string(r.status) + " " + r.error.substr(0, 120)];
              asio::steady_timer pause(co_await asio::this_coro::executor,
                                       std::chrono::milliseconds(100));
              co_await pause.async_wait(asio::use_awaitable);
            }
          }
        },
        asio::detached);
  }
  // The gateway's memory, sampled once a second while the clients run (one client thread: the
  // sampler runs on it too, between events).
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor);
        while (Clock::now() < deadline) {
          timer.expires_after(std::chrono::seconds(1));
          co_await timer.async_wait(asio::use_awaitable);
          const int64_t rss = RssKb(a.gateway_pid, "VmRSS:");
          out.rss_peak_kb = std::max(out.rss_peak_kb, rss);
          // Once every client has its connection and a request or two behind it: from here on
          // the memory should stay flat.
          if (out.rss_warm_kb < 0 && Clock::now() - start >= warm_up) out.rss_warm_kb = rss;
        }
      },
      asio::detached);
  io.run();
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  out.rss_end_kb = RssKb(a.gateway_pid, "VmRSS:");
  const auto after = HistogramBuckets(Call(a.port, http::verb::get, "/metrics", ""), setup_metric);
  out.setup_p50_ms = HistogramPercentile(before, after, 50) * 1000;
  out.setup_p99_ms = HistogramPercentile(before, after, 99) * 1000;
  return out;
}

bool Parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (k == "--port")
      a.port = std::atoi(v);
    else if (k == "--engine")
      a.engine = v;
    else if (k == "--gateway-pid")
      a.gateway_pid = std::atoi(v);
    else if (k == "--clients")
      a.clients = std::atoi(v);
    else if (k == "--seconds")
      a.seconds = std::atoi(v);
    else if (k == "--pairs")
      a.pairs = std::atoi(v);
    else if (k == "--max-tokens")
      a.max_tokens = std::atoi(v);
    else if (k == "--prompt")
      a.prompt = v;
    else
      return false;
  }
  return a.port > 0 && a.port < 65536 && a.clients > 0 && a.seconds > 0 && a.pairs >= 0 &&
         a.max_tokens > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: m3-bench-openai-load --port P [--engine HOST:PORT] [--gateway-pid PID] "
                 "[--clients N] [--seconds T] [--pairs N] [--max-tokens N] [--prompt TEXT]\n");
    return 2;
  }
  try {
    const json models = json::parse(Call(a.port, http::verb::get, "/v1/models", ""));
    const std::string model = models.at("data").at(0).at("id").get<std::string>();
    const std::string body = json{
        {"model", model},
        {"messages", {{{"role", "user"}, {"content", a.prompt}}}},
        {"stream", true},
        {"temperature", 0},
        {"max_tokens",
         a.max_tokens}}.dump();
    json report = {{"model", model},
                   {"prompt", a.prompt},
                   {"max_tokens", a.max_tokens},
                   {"clients", a.clients},
                   {"seconds", a.seconds}};
    if (!a.engine.empty() && a.pairs > 0) {
      const Pairs p = RunPairs(a, model, body);
      report["paired"] = {{"pairs", p.d_ttft.size()},
                          {"errors", p.errors},
                          {"gateway_ttft_p50_ms", Percentile(p.gw_ttft, 50)},
                          {"engine_ttft_p50_ms", Percentile(p.engine_ttft, 50)},
                          {"gateway_total_p50_ms", Percentile(p.gw_total, 50)},
                          {"engine_total_p50_ms", Percentile(p.engine_total, 50)},
                          {"added_ttft_p50_ms", Percentile(p.d_ttft, 50)},
                          {"added_ttft_p99_ms", Percentile(p.d_ttft, 99)},
                          {"added_total_p50_ms", Percentile(p.d_total, 50)},
                          {"added_total_p99_ms", Percentile(p.d_total, 99)}};
      std::printf(
          "paired (%zu, one at a time): TTFT gateway %.2f ms vs engine %.2f ms; added: first "
          "token p50 %.3f ms p99 %.3f ms, whole request p50 %.3f ms p99 %.3f ms\n",
          p.d_ttft.size(), Percentile(p.gw_ttft, 50), Percentile(p.engine_ttft, 50),
          Percentile(p.d_ttft, 50), Percentile(p.d_ttft, 99), Percentile(p.d_total, 50),
          Percentile(p.d_total, 99));
      std::fflush(stdout);
    }
    const Load l = RunLoad(a, body);
    report["load"] = {{"requests", l.requests},
                      {"errors", l.errors},
                      {"error_kinds", l.error_kinds},
                      {"requests_per_s", static_cast<double>(l.requests - l.errors) / l.seconds},
                      {"ttft_p50_ms", Percentile(l.ttft, 50)},
                      {"ttft_p99_ms", Percentile(l.ttft, 99)},
                      {"total_p50_ms", Percentile(l.total, 50)},
                      {"total_p99_ms", Percentile(l.total, 99)},
                      {"gateway_setup_p50_ms", l.setup_p50_ms},
                      {"gateway_setup_p99_ms", l.setup_p99_ms},
                      {"gateway_rss_start_kb", l.rss_start_kb},
                      {"gateway_rss_warm_kb", l.rss_warm_kb},
                      {"gateway_rss_end_kb", l.rss_end_kb},
                      {"gateway_rss_peak_kb", l.rss_peak_kb}};
    std::printf(
        "load (%d clients, %.0f s): %lld requests, %lld errors, %.1f req/s, TTFT p50 %.1f ms p99 "
        "%.1f ms, gateway setup p50 %.3f ms p99 %.3f ms, gateway RSS %lld kB idle, %lld kB "
        "after warm-up, %lld kB at the end (peak %lld)\n",
        a.clients, l.seconds, static_cast<long long>(l.requests), static_cast<long long>(l.errors),
        static_cast<double>(l.requests - l.errors) / l.seconds, Percentile(l.ttft, 50),
        Percentile(l.ttft, 99), l.setup_p50_ms, l.setup_p99_ms,
        static_cast<long long>(l.rss_start_kb), static_cast<long long>(l.rss_warm_kb),
        static_cast<long long>(l.rss_end_kb), static_cast<long long>(l.rss_peak_kb));
    std::printf("%s\n", report.dump().c_str());
    return l.errors == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "m3-bench-openai-load: %s\n", e.what());
    return 1;
  }
}
