// EngineServer: the gRPC server process around an EngineCore: listens (alone on its port:
// no SO_REUSEPORT), sizes the message limit from the model's largest legal request, checks
// the optional API key on every RPC, and shuts down gracefully on SIGTERM / SIGINT (stop
// admitting, let running streams finish, exit; a second signal stops at once).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/runtime/engine_core.h"

namespace m3::engine::server {

struct ServerOptions {
  std::string address = "127.0.0.1:8000";
  std::string model_name;
  int64_t max_message_bytes = 0;  // 0: MaxRequestBytes of the model (message_limit.h)
  std::string api_key;            // empty: no authentication
  int drain_timeout_s = 600;      // longest wait for running streams after SIGTERM
  std::string model_dir;          // its tokenizer.json is the structured outputs' vocabulary
};

// Installs the SIGTERM / SIGINT handlers (they only note the signal, whichever thread takes
// it: libraries such as OpenBLAS start threads before main that no signal mask reaches) and
// ignores SIGPIPE. Call before loading the model, so a signal during loading is kept too.
void InstallShutdownHandlers();

// Serves until a shutdown signal; returns the process exit code.
int RunServer(EngineCore& core, const ServerOptions& options);

}  // namespace m3::engine::server
