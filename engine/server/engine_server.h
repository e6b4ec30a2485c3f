// EngineServer: the gRPC server process around an EngineCore: listens, raises the message
// limits to what long videos need, and shuts down gracefully on SIGTERM / SIGINT (stop
// admitting, let running streams finish, exit; a second signal stops at once).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/runtime/engine_core.h"

namespace m3::engine::server {

struct ServerOptions {
  std::string address = "0.0.0.0:8000";
  std::string model_name;
  int64_t max_message_bytes = int64_t{1} << 30;
  int drain_timeout_s = 600;  // longest wait for running streams after SIGTERM
};

// Blocks SIGTERM / SIGINT / SIGPIPE in the calling thread; call first in main, before any
// thread starts, so only RunServer's sigwait sees them.
void BlockShutdownSignals();

// Serves until a shutdown signal; returns the process exit code.
int RunServer(EngineCore& core, const ServerOptions& options);

}  // namespace m3::engine::server
