// m3-bench-preprocess-load: a load test of a running preprocessing service
// (`m3-gateway serve --preprocess-only`) on loopback. CLIENTS threads (default 64), each on
// its own keep-alive connection, send for SECONDS (default 60) a mix of valid requests (a
// PNG as a data: URI) and invalid ones (malformed JSON, a refused URL, an unsupported scheme,
// a missing field, JSON nested too deep, a bad data: URI); latency is recorded per class. With
// --server-pid, the server's resident memory (VmRSS, and its peak VmHWM) is read after every
// run, so repeated runs (--runs) show whether memory grows. Prints one JSON object per run.
//
//   m3-bench-preprocess-load --port 8000 --image tests/data/m3-tiny/images/img01_224x224.png
//       [--clients 64] [--seconds 60] [--runs 3] [--valid-percent 50] [--server-pid PID]
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/net/base64.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int port = 8000;
  std::string image;
  int clients = 64;
  int seconds = 60;
  int runs = 1;
  int valid_percent = 50;
  int server_pid = 0;
};

// One keep-alive connection; reconnects when the server closes it.
class Connection {
 public:
  explicit Connection(int port) : port_(port) {}
  ~Connection() { Close(); }

  // Sends `request` and returns the status (0: transport failure).
  int Call(const std::string& request) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (fd_ < 0 && !Open()) return 0;
      if (!SendAll(request)) {
        Close();
        continue;
      }
      bool close_after = false;
      const int status = ReadResponse(&close_after);
      if (status == 0) {
        Close();
        continue;
      }
      if (close_after) Close();
      return status;
    }
    return 0;
  }

 private:
  bool Open() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return false;
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      Close();
      return false;
    }
    buffer_.clear();
    return true;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool SendAll(const std::string& data) {
    size_t at = 0;
    while (at < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + at, data.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    return true;
  }
  bool Fill() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 120000) <= 0) return false;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }
  int ReadResponse(bool* close_after) {
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return 0;
    }
    const std::string head = buffer_.substr(0, end);
    int status = 0;
    if (std::sscanf(head.c_str(), "HTTP/1.%*d %d", &status) != 1) return 0;
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    size_t length = 0;
    if (const size_t cl = lower.find("content-length:"); cl != std::string::npos) {
      length = std::strtoull(lower.c_str() + cl + 15, nullptr, 10);
    }
    *close_after = lower.find("connection: close") != std::string::npos;
    while (buffer_.size() < end + 4 + length) {
      if (!Fill()) return 0;
    }
    buffer_.erase(0, end + 4 + length);
    return status;
  }

  int port_;
  int fd_ = -1;
  std::string buffer_;
};

std::string Post(const std::string& body) {
  return "POST /v1/preprocess HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The invalid requests, each a different early refusal.
std::vector<std::string> InvalidBodies() {
  auto image = [](const std::string& url) {
    return R"({"content":[{"type":"image_url","image_url":{"url":")" + url + R"("}}]})";
  };
  return {
      R"({"content":[{"type":"image_url","image_url":{"url":)",  // malformed JSON
      image("http://169.254.169.254/latest/meta-data/"),         // SSRF guard
      image("http://127.0.0.1:1/a.png"),                         // loopback
      image("ftp://example.com/a.png"),                          // unsupported scheme
      R"({"model":"m3"})",                                       // no content
      std::string(200, '[') + std::string(200, ']'),             // nested too deep
      image("data:image/png;base64,@@@@"),                       // bad base64
      R"({"content":[{"type":"image_url","image_url":{"url":"x"}}],"max_pixels":-4})",
  };
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

int64_t ProcStatusKb(int pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0)
      return std::strtoll(line.c_str() + std::strlen(field), nullptr, 10);
  }
  return -1;
}

struct Samples {
  std::vector<double> valid_ms, invalid_ms, busy_ms;
  std::map<int, int64_t> statuses;
  int64_t failures = 0;
};

nlohmann::json RunOnce(const Args& a, const std::string& valid_body, int run) {
  const std::vector<std::string> invalid = InvalidBodies();
  const std::string valid_request = Post(valid_body);
  std::vector<std::string> invalid_requests;
  for (const auto& b : invalid) invalid_requests.push_back(Post(b));
  const auto until = Clock::now() + std::chrono::seconds(a.seconds);
  std::mutex mu;
  Samples all;
  std::vector<std::thread> threads;
  for (int c = 0; c < a.clients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(static_cast<unsigned>(run * 1000 + c));
      Connection conn(a.port);
      Samples mine;
      while (Clock::now() < until) {
        const bool valid = static_cast<int>(rng() % 100) < a.valid_percent;
        const std::string& request =
            valid ? valid_request : invalid_requests[rng() % invalid_requests.size()];
        const auto start = Clock::now();
        const int status = conn.Call(request);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        ++mine.statuses[status];
        if (status == 0) {
          ++mine.failures;
        } else if (valid && status == 200) {
          mine.valid_ms.push_back(ms);
        } else if (valid) {
          mine.busy_ms.push_back(ms);  // 429: refused under load
        } else {
          mine.invalid_ms.push_back(ms);
        }
      }
      std::lock_guard lock(mu);
      all.valid_ms.insert(all.valid_ms.end(), mine.valid_ms.begin(), mine.valid_ms.end());
      all.invalid_ms.insert(all.invalid_ms.end(), mine.invalid_ms.begin(), mine.invalid_ms.end());
      all.busy_ms.insert(all.busy_ms.end(), mine.busy_ms.begin(), mine.busy_ms.end());
      for (auto [s, n] : mine.statuses) all.statuses[s] += n;
      all.failures += mine.failures;
    });
  }
  for (auto& t : threads) t.join();
  nlohmann::json statuses = nlohmann::json::object();
  for (auto [s, n] : all.statuses) statuses[std::to_string(s)] = n;
  nlohmann::json out = {
      {"run", run},
      {"clients", a.clients},
      {"seconds", a.seconds},
      {"valid_ok", all.valid_ms.size()},
      {"valid_p50_ms", Percentile(all.valid_ms, 0.50)},
      {"valid_p99_ms", Percentile(all.valid_ms, 0.99)},
      {"valid_refused_busy", all.busy_ms.size()},
      {"invalid", all.invalid_ms.size()},
      {"invalid_p50_ms", Percentile(all.invalid_ms, 0.50)},
      {"invalid_p99_ms", Percentile(all.invalid_ms, 0.99)},
      {"invalid_max_ms", all.invalid_ms.empty() ? 0.0 : all.invalid_ms.back()},
      {"transport_failures", all.failures},
      {"statuses", statuses},
  };
  if (a.server_pid > 0) {
    out["server_rss_mb"] = ProcStatusKb(a.server_pid, "VmRSS:") / 1024.0;
    out["server_peak_rss_mb"] = ProcStatusKb(a.server_pid, "VmHWM:") / 1024.0;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--port")
      a.port = std::atoi(v.c_str());
    else if (k == "--image")
      a.image = v;
    else if (k == "--clients")
      a.clients = std::atoi(v.c_str());
    else if (k == "--seconds")
      a.seconds = std::atoi(v.c_str());
    else if (k == "--runs")
      a.runs = std::atoi(v.c_str());
    else if (k == "--valid-percent")
      a.valid_percent = std::atoi(v.c_str());
    else if (k == "--server-pid")
      a.server_pid = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  std::ifstream in(a.image, std::ios::binary);
  if (a.image.empty() || !in) {
    std::fprintf(stderr, "--image FILE (a PNG) is required\n");
    return 2;
  }
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::string valid_body =
      R"({"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,)" +
      m3::net::Base64Encode(bytes.str()) + R"("}}]})";
  if (a.server_pid > 0) {
    std::printf("{\"before\":true,\"server_rss_mb\":%.1f}\n",
                ProcStatusKb(a.server_pid, "VmRSS:") / 1024.0);
  }
  for (int run = 1; run <= a.runs; ++run) {
    std::printf("%s\n", RunOnce(a, valid_body, run).dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
