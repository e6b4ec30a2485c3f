// Loopback HTTP helpers for the net tests: a tiny scripted HTTP/1.1 origin server (plain
// sockets, a thread per connection) that can serve bodies, redirect, stall or answer slowly;
// a blocking HTTP client with a timeout; and a child m3-gateway process whose first stdout
// line announces its ports. Everything binds 127.0.0.1 and every wait is bounded.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace m3::test {

struct ScriptedReply {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  int delay_ms = 0;                  // wait before answering
  bool never_answer = false;         // read the request, then stall until the server stops
  bool omit_content_length = false;  // body ends when the connection closes
};

class LoopbackOrigin {
 public:
  using Route = std::function<ScriptedReply(const std::string& path)>;
  explicit LoopbackOrigin(Route route);
  ~LoopbackOrigin();

  uint16_t port() const { return port_; }
  std::string Url(const std::string& path) const;  // http://127.0.0.1:PORT/path
  int requests() const { return requests_.load(); }

 private:
  void AcceptLoop();
  void Serve(int fd);

  Route route_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

struct HttpReply {
  int status = 0;                              // 0: no answer (connection failed or timed out)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};
// A TCP connection to 127.0.0.1:port: its descriptor, or -1 when it cannot connect.
int ConnectLoopback(uint16_t port);

// Sends all of `data` (no SIGPIPE); false when the peer is gone.
bool SendAll(int fd, const std::string& data);

// One read of what arrives on fd before `until`, appended to `into`.
enum class Received { kData, kClosed, kTimedOut };  // kClosed: EOF or a reset
Received ReceiveSome(int fd, std::chrono::steady_clock::time_point until, std::string& into);

// One request over a fresh connection to 127.0.0.1:port, Connection: close.
HttpReply HttpCall(uint16_t port, const std::string& method, const std::string& target,
                   const std::string& body = "",
                   const std::string& content_type = "application/json", int timeout_ms = 20000);

class GatewayProcess {
 public:
  // Starts <bin>/m3-gateway with args and waits (bounded) for its "listening" line.
  explicit GatewayProcess(const std::vector<std::string>& args);
  ~GatewayProcess();  // SIGTERM, bounded wait, SIGKILL if needed

  uint16_t http_port() const { return http_port_; }
  uint16_t grpc_port() const { return grpc_port_; }
  pid_t pid() const { return pid_; }
  // Sends SIGTERM and returns the exit status (-1 when it had to be killed).
  int Terminate(int timeout_ms = 10000);
  const std::string& banner() const { return banner_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  uint16_t http_port_ = 0;
  uint16_t grpc_port_ = 0;
  std::string banner_;
};

}  // namespace m3::test
