// ServerProcess: fork/exec with stdout on a pipe (for the port line) and stderr to a log file.
#include "tests/engine_server/server_process.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "tests/test_util.h"

namespace m3::test {

ServerProcess::ServerProcess(const std::string& model, const std::vector<std::string>& args,
                             int port) {
  signal(SIGPIPE, SIG_IGN);
  log_path_ = TempDir() + "/server.log";
  // No --host: engines listen on loopback by default (listen_test checks that they do).
  std::vector<std::string> argv = {BinPath("m3-engine"), "serve",  "--model",
                                   DataPath(model),      "--port", std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  int out[2];
  if (pipe2(out, O_CLOEXEC)) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(out[1], 1);
    int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
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
      ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
      auto at = text.find(marker);
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

ServerProcess::~ServerProcess() {
  Kill();
}

void ServerProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::unique_ptr<engine::v1::Engine::Stub> ServerProcess::Stub() const {
  grpc::ChannelArguments ch;
  ch.SetMaxSendMessageSize(1 << 30);
  ch.SetMaxReceiveMessageSize(1 << 30);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_),
                                           grpc::InsecureChannelCredentials(), ch);
  return engine::v1::Engine::NewStub(channel);
}

int ServerProcess::WaitExit(int timeout_ms) {
  for (int waited = 0; waited <= timeout_ms; waited += 5) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -2;
}

int ServerProcess::Stop(int sig) {
  kill(pid_, sig);
  return WaitExit(60000);
}

std::string ServerProcess::Log() const {
  return ReadFile(log_path_);
}

}  // namespace m3::test
