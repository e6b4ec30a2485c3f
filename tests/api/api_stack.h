// The real processes the API tests run against: `m3-engine serve` workers (on a free port, or
// on a given one so a killed engine can come back where the gateway expects it) and the
// `m3-gateway serve` process (tests/net/loopback_http.h's GatewayProcess), plus helpers for
// the requests: data: URIs of test files, and the reference conversations with their images
// rewritten as data: URIs or http URLs.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace m3::test {

class EngineProcess {
 public:
  // `m3-engine serve --model DATA/<model> --host 127.0.0.1 --port <port>`; port 0: any free
  // one. Throws if it does not report its port within 60 s.
  explicit EngineProcess(const std::string& model, int port = 0,
                         const std::vector<std::string>& args = {});
  ~EngineProcess();  // SIGKILL

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void Kill();  // SIGKILL and reap
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

std::string DataUri(const std::string& path, const std::string& mime);

// Every image part of `messages` (an OpenAI image_url part or an HF {"type": "image"} part)
// gets the URL `url_for(relative path or "", index)` as an image_url part.
nlohmann::json RewriteImages(nlohmann::json messages,
                             const std::function<std::string(const std::string&, int)>& url_for);

}  // namespace m3::test
