// RunServer: grpc::Server setup and the signal-driven graceful shutdown.
#include "engine/server/engine_server.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>

#include "engine/server/engine_service.h"
#include "engine/server/message_limit.h"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::server {
namespace {

int g_signal_pipe[2] = {-1, -1};

extern "C" void OnShutdownSignal(int sig) {
  const char c = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &c, 1);  // async-signal-safe
}

// The next shutdown signal, or 0 after `timeout_ms` (-1: wait for ever).
int WaitSignal(int timeout_ms) {
  pollfd p{g_signal_pipe[0], POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return 0;
  char c = 0;
  return read(g_signal_pipe[0], &c, 1) == 1 ? c : 0;
}

}  // namespace

void InstallShutdownHandlers() {
  if (g_signal_pipe[0] < 0)
    Require(pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0, ErrorCode::kInternal,
            "cannot create the signal pipe");
  struct sigaction sa {};
  sa.sa_handler = OnShutdownSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int RunServer(EngineCore& core, const ServerOptions& options) {
  const int64_t max_message_bytes = options.max_message_bytes > 0
                                        ? options.max_message_bytes
                                        : MaxRequestBytes(core.info(), core.max_prompt_tokens());
  // Structured outputs' vocabulary: the eos ids the sampler stops on are the grammar's stops.
  std::vector<int32_t> stop_ids;
  const std::vector<int64_t>& eos = core.config().generation.eos_token_ids.empty()
                                        ? core.info().eos_token_ids
                                        : core.config().generation.eos_token_ids;
  for (int64_t e : eos)
    if (e >= 0 && e < core.info().vocab_size) stop_ids.push_back(static_cast<int32_t>(e));
  std::shared_ptr<const StructuredOutputCompiler> structured;
  if (!options.model_dir.empty())
    structured =
        StructuredOutputCompiler::Load(options.model_dir, core.info().vocab_size, stop_ids);
  EngineService service(core, {options.model_name, max_message_bytes, options.api_key, structured});
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  const int limit = static_cast<int>(std::min<int64_t>(max_message_bytes, INT_MAX));
  builder.SetMaxReceiveMessageSize(limit);
  builder.SetMaxSendMessageSize(limit);
  // gRPC sets SO_REUSEPORT by default: a second engine on a port another one holds would then
  // start and take half its connections. Without it the bind fails and the engine exits.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Keepalive pings find a client that vanished without closing its connection, so its
  // streams are cancelled (and their pages freed) within about half a minute.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  Require(server != nullptr && port > 0, ErrorCode::kUnavailable,
          "cannot listen on " + options.address +
              ": the port is held by another process (another engine?) or the host is not an "
              "address of this machine");
  Log(LogLevel::kInfo, "m3-engine: serving ", options.model_name, " on ", options.address,
      " (port ", port, "), message limit ", max_message_bytes, " bytes",
      options.api_key.empty() ? "" : ", API key required");
  // The tests and scripts wait for this line on stdout.
  std::printf("m3-engine: listening on port %d\n", port);
  std::fflush(stdout);

  int sig = 0;
  while (sig == 0) sig = WaitSignal(-1);
  Log(LogLevel::kInfo, "m3-engine: signal ", sig, ": no new requests; finishing running ones");
  core.StopAdmission();
  // Wait for the running streams; a second signal (or the drain timeout) stops at once.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(options.drain_timeout_s);
  bool drained = false;
  for (;;) {
    if (core.Idle()) {
      drained = true;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline || WaitSignal(10) != 0) break;
  }
  if (!drained) Log(LogLevel::kWarn, "m3-engine: stopping before all streams finished");
  // Streams already finished in the engine still flush their last messages.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(drained ? 5 : 0));
  Log(LogLevel::kInfo, "m3-engine: stopped");
  return 0;
}

}  // namespace m3::engine::server
