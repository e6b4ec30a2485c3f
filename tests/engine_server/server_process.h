// ServerProcess: a real `m3-engine serve` child process for the server and API tests, started
// on a free port (--port 0, the port read back from its stdout) or a given one (so a killed
// engine can come back where a gateway expects it), and stopped when the test ends.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "engine.grpc.pb.h"

namespace m3::test {

class ServerProcess {
 public:
  // Starts `m3-engine serve --model DATA/<model> --port <port> <args...>` (port 0: any free
  // one); throws if it does not report its port within 60 s.
  ServerProcess(const std::string& model, const std::vector<std::string>& args = {}, int port = 0);
  ~ServerProcess();  // Kill()

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  std::unique_ptr<engine::v1::Engine::Stub> Stub() const;
  // Sends `sig` and waits for the exit; returns the exit status (-1: killed by a signal).
  int Stop(int sig);
  // Waits up to `timeout_ms` for the process to exit; the status, or -2 if it still runs.
  int WaitExit(int timeout_ms);
  void Kill();              // SIGKILL and reap, if still running
  std::string Log() const;  // its stderr so far

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

}  // namespace m3::test
