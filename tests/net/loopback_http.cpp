// Loopback HTTP helpers for the net tests (see loopback_http.h).
#include "tests/net/loopback_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <stdexcept>

#include "tests/test_util.h"

namespace m3::test {
namespace {

using Clock = std::chrono::steady_clock;

int Remaining(Clock::time_point until) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(ms);
}

std::string ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 404:
      return "Not Found";
    default:
      return "Status";
  }
}

}  // namespace

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

Received ReceiveSome(int fd, std::chrono::steady_clock::time_point until, std::string& into) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, Remaining(until)) <= 0) return Received::kTimedOut;
  char buf[16384];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n <= 0) return Received::kClosed;
  into.append(buf, static_cast<size_t>(n));
  return Received::kData;
}

LoopbackOrigin::LoopbackOrigin(Route route) : route_(std::move(route)) {
  if (pipe2(stop_pipe_, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    throw std::runtime_error("cannot listen on loopback");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

LoopbackOrigin::~LoopbackOrigin() {
  stop_ = true;
  char c = 1;
  (void)!::write(stop_pipe_[1], &c, 1);
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
  ::close(listen_fd_);
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
}

std::string LoopbackOrigin::Url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

void LoopbackOrigin::AcceptLoop() {
  while (!stop_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, 1000) <= 0 || (fds[1].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu_);
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void LoopbackOrigin::Serve(int fd) {
  std::string request;
  auto until = Clock::now() + std::chrono::seconds(10);
  char buf[4096];
  while (request.find("\r\n\r\n") == std::string::npos && !stop_) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, Remaining(until)) <= 0 || (fds[1].revents & POLLIN)) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    request.append(buf, static_cast<size_t>(n));
  }
  size_t sp1 = request.find(' '), sp2 = request.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    ::close(fd);
    return;
  }
  ++requests_;
  ScriptedReply reply = route_(request.substr(sp1 + 1, sp2 - sp1 - 1));
  int wait_ms = reply.never_answer ? 60000 : reply.delay_ms;
  if (wait_ms > 0) {
    pollfd stop{stop_pipe_[0], POLLIN, 0};
    ::poll(&stop, 1, wait_ms);  // ends early when the server stops
  }
  if (!reply.never_answer && !stop_) {
    std::string head =
        "HTTP/1.1 " + std::to_string(reply.status) + " " + ReasonPhrase(reply.status) + "\r\n";
    for (const auto& [k, v] : reply.headers) head += k + ": " + v + "\r\n";
    if (!reply.omit_content_length)
      head += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
    head += "Connection: close\r\n\r\n";
    if (SendAll(fd, head)) SendAll(fd, reply.body);
  }
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

int ConnectLoopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

HttpReply HttpCall(uint16_t port, const std::string& method, const std::string& target,
                   const std::string& body, const std::string& content_type, int timeout_ms) {
  HttpReply reply;
  const int fd = ConnectLoopback(port);
  if (fd < 0) return reply;
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!body.empty() || method == "POST") {
    req += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n";
  }
  req += "\r\n" + body;
  SendAll(fd, req);  // a server may answer (e.g. 413) before taking the whole body
  std::string raw;
  auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, Remaining(until)) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos || raw.compare(0, 5, "HTTP/") != 0) return reply;
  reply.status = std::stoi(raw.substr(raw.find(' ') + 1, 3));
  size_t line = raw.find("\r\n") + 2;
  while (line < head_end) {
    size_t eol = raw.find("\r\n", line);
    std::string h = raw.substr(line, eol - line);
    size_t colon = h.find(':');
    if (colon != std::string::npos) {
      std::string name = h.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = h.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      reply.headers[name] = value;
    }
    line = eol + 2;
  }
  reply.body = raw.substr(head_end + 4);
  return reply;
}

GatewayProcess::GatewayProcess(const std::vector<std::string>& args) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> argv = {BinPath("m3-gateway")};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(out[1], 1);
    std::vector<char*> cargs;
    for (auto& a : argv) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    execv(cargs[0], cargs.data());
    _exit(127);
  }
  ::close(out[1]);
  out_fd_ = out[0];
  auto until = Clock::now() + std::chrono::seconds(30);
  char buf[1024];
  while (banner_.find('\n') == std::string::npos) {
    pollfd p{out_fd_, POLLIN, 0};
    if (::poll(&p, 1, Remaining(until)) <= 0) break;
    ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n <= 0) break;
    banner_.append(buf, static_cast<size_t>(n));
  }
  auto port_after = [&](const std::string& key) -> uint16_t {
    size_t at = banner_.find(key);
    if (at == std::string::npos) return 0;
    size_t colon = banner_.find(':', at + key.size());
    size_t space = banner_.find_first_of(" \n", at);
    if (colon == std::string::npos || colon > space) return 0;
    return static_cast<uint16_t>(std::stoi(banner_.substr(colon + 1, space - colon - 1)));
  };
  http_port_ = port_after("http=");
  grpc_port_ = port_after("grpc=");
  if (http_port_ == 0) {
    Terminate(2000);
    throw std::runtime_error("m3-gateway did not start; stdout: " + banner_);
  }
}

int GatewayProcess::Terminate(int timeout_ms) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  int result = -1;
  for (;;) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      result = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    if (Clock::now() >= until) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  if (out_fd_ >= 0) ::close(out_fd_);
  out_fd_ = -1;
  return result;
}

GatewayProcess::~GatewayProcess() {
  Terminate();
}

}  // namespace m3::test
