// The API tests' HTTP client and SSE reader (see api_client.h).
#include "tests/api/api_client.h"

#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace m3::test {
namespace {

using Clock = std::chrono::steady_clock;

int Remaining(Clock::time_point until) {
  return static_cast<int>(std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count()));
}

class Connection {
 public:
  Connection(uint16_t port, Clock::time_point until) : until_(until) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  bool SendAll(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Appends what arrives to `buf`; false at end of stream, error or timeout.
  bool Read(std::string& buf) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, Remaining(until_)) <= 0) return false;
    char chunk[16384];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
    return true;
  }

 private:
  int fd_ = -1;
  Clock::time_point until_;
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

ApiReply ApiCall(uint16_t port, const std::string& method, const std::string& target,
                 const std::string& body, const Headers& headers, int timeout_ms,
                 const std::function<void(std::string_view)>& on_data) {
  ApiReply reply;
  Connection c(port, Clock::now() + std::chrono::milliseconds(timeout_ms));
  if (!c.ok()) {
    reply.error = "connect failed";
    return reply;
  }
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const auto& [name, value] : headers) req += name + ": " + value + "\r\n";
  if (!body.empty() || method == "POST")
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n";
  // A server may refuse on the head alone and close: a failed body send is not an error yet.
  c.SendAll(req + body);

  std::string buf;
  size_t head_end;
  while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (!c.Read(buf)) {
      reply.error = "no complete response head";
      return reply;
    }
  }
  const std::string head = buf.substr(0, head_end);
  buf.erase(0, head_end + 4);
  size_t line_end = head.find("\r\n");
  const std::string status_line = head.substr(0, line_end);
  const size_t sp = status_line.find(' ');
  reply.status = sp == std::string::npos ? 0 : std::atoi(status_line.c_str() + sp + 1);
  while (line_end != std::string::npos) {
    const size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    const std::string line =
        head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    reply.headers[Lower(line.substr(0, colon))] = value;
  }
  auto deliver = [&](std::string_view piece) {
    reply.body.append(piece);
    if (on_data && !piece.empty()) on_data(piece);
  };
  if (Lower(reply.headers["transfer-encoding"]) == "chunked") {
    for (;;) {
      size_t eol;
      while ((eol = buf.find("\r\n")) == std::string::npos) {
        if (!c.Read(buf)) {
          reply.error = "stream ended inside a chunk header";
          return reply;
        }
      }
      const size_t size = std::stoul(buf.substr(0, eol), nullptr, 16);
      while (buf.size() < eol + 2 + size + 2) {
        if (!c.Read(buf)) {
          reply.error = "stream ended inside a chunk";
          return reply;
        }
      }
      if (size == 0) break;
      deliver(std::string_view(buf).substr(eol + 2, size));
      buf.erase(0, eol + 2 + size + 2);
    }
    reply.complete = true;
  } else if (reply.headers.count("content-length")) {
    const size_t length = std::stoul(reply.headers["content-length"]);
    while (buf.size() < length && c.Read(buf)) {
    }
    reply.complete = buf.size() >= length;
    if (!reply.complete) reply.error = "body shorter than its Content-Length";
    deliver(std::string_view(buf).substr(0, std::min(buf.size(), length)));
  } else {
    while (c.Read(buf)) {
    }
    reply.complete = true;
    deliver(buf);
  }
  return reply;
}

ApiReply PostJson(uint16_t port, const std::string& target, const nlohmann::json& body,
                  const Headers& headers, int timeout_ms) {
  Headers all = headers;
  all.emplace_back("Content-Type", "application/json");
  return ApiCall(port, "POST", target, body.dump(), all, timeout_ms);
}

StreamSummary ReadSse(const std::string& sse) {
  StreamSummary out;
  size_t at = 0;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    if (end == std::string::npos) {
      out.well_formed = false;
      break;
    }
    const std::string event = sse.substr(at, end - at);
    at = end + 2;
    if (event.rfind("data: ", 0) != 0) {
      out.well_formed = false;
      continue;
    }
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    const nlohmann::json chunk = nlohmann::json::parse(data, nullptr, false);
    if (chunk.is_discarded()) {
      out.well_formed = false;
      continue;
    }
    if (chunk.contains("error")) {
      out.errors.push_back(chunk);
      continue;
    }
    ++out.chunks;
    if (chunk.contains("usage") && !chunk["usage"].is_null()) out.usage = chunk["usage"];
    for (const auto& choice : chunk.value("choices", nlohmann::json::array())) {
      if (choice.contains("delta")) {
        const auto& delta = choice["delta"];
        if (delta.contains("content") && delta["content"].is_string()) {
          out.content += delta["content"].get<std::string>();
        }
        if (delta.contains("reasoning_content") && delta["reasoning_content"].is_string()) {
          out.reasoning += delta["reasoning_content"].get<std::string>();
        }
      }
      if (choice.contains("text") && choice["text"].is_string()) {
        out.text += choice["text"].get<std::string>();
      }
      if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
        out.finish_reason = choice["finish_reason"].get<std::string>();
      }
    }
  }
  return out;
}

StoppedStream StreamThenStop(uint16_t port, const std::string& target, const std::string& body,
                             std::string_view marker, const std::function<int()>& terminate) {
  StoppedStream out;
  std::string seen;
  std::thread stopper;
  out.reply = ApiCall(port, "POST", target, body, {{"Content-Type", "application/json"}}, 60000,
                      [&](std::string_view piece) {
                        seen.append(piece);
                        if (!out.started && seen.find(marker) != std::string::npos) {
                          out.started = true;
                          stopper = std::thread([&] { out.exit_status = terminate(); });
                        }
                      });
  if (stopper.joinable()) stopper.join();
  return out;
}

}  // namespace m3::test
