// Engine processes and request helpers for the API tests (see api_stack.h).
#include "tests/api/api_stack.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>

#include "gateway/net/base64.h"
#include "tests/test_util.h"

namespace m3::test {

EngineProcess::EngineProcess(const std::string& model, int port,
                             const std::vector<std::string>& args) {
  signal(SIGPIPE, SIG_IGN);
  log_path_ = TempDir() + "/engine.log";
  std::vector<std::string> argv = {
      BinPath("m3-engine"), "serve",  "--model",  DataPath(model), "--port",
      std::to_string(port), "--host", "127.0.0.1"};
  argv.insert(argv.end(), args.begin(), args.end());
  int out[2];
  if (pipe2(out, O_CLOEXEC)) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(out[1], 1);
    const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) dup2(log, 2);
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const std::string marker = "listening on port ";
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char buf[256];
      const ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
      const auto at = text.find(marker);
      if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
        port_ = std::stoi(text.substr(at + marker.size()));
        break;
      }
    }
  }
  close(out[0]);
  if (port_ <= 0) {
    Kill();
    throw std::runtime_error("m3-engine serve did not start: " + ReadFile(log_path_));
  }
}

EngineProcess::~EngineProcess() {
  Kill();
}

void EngineProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string EngineProcess::Log() const {
  return ReadFile(log_path_);
}

std::string DataUri(const std::string& path, const std::string& mime) {
  return "data:" + mime + ";base64," + net::Base64Encode(ReadFile(path));
}

nlohmann::json RewriteImages(nlohmann::json messages,
                             const std::function<std::string(const std::string&, int)>& url_for) {
  int index = 0;
  for (auto& m : messages) {
    if (!m["content"].is_array()) continue;
    for (auto& part : m["content"]) {
      std::string path;
      if (part["type"] == "image_url") {
        path = part["image_url"]["url"].get<std::string>();
      } else if (part["type"] != "image") {
        continue;
      }
      part = {{"type", "image_url"}, {"image_url", {{"url", url_for(path, index++)}}}};
    }
  }
  return messages;
}

}  // namespace m3::test
