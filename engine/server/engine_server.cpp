// RunServer: grpc::Server setup and the signal-driven graceful shutdown.
#include "engine/server/engine_server.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>

#include "engine/server/engine_service.h"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::server {
namespace {

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int RunServer(EngineCore& core, const ServerOptions& options) {
  EngineService service(core, {options.model_name, options.max_message_bytes});
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  const int limit = static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT_MAX));
  builder.SetMaxReceiveMessageSize(limit);
  builder.SetMaxSendMessageSize(limit);
  // Keepalive pings find a client that vanished without closing its connection, so its
  // streams are cancelled (and their pages freed) within about half a minute.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  Require(server != nullptr && port > 0, ErrorCode::kUnavailable,
          "cannot listen on " + options.address);
  Log(LogLevel::kInfo, "m3-engine: serving ", options.model_name, " on port ", port);
  // The tests and scripts wait for this line on stdout.
  std::printf("m3-engine: listening on port %d\n", port);
  std::fflush(stdout);

  sigset_t set = ShutdownSignals();
  int sig = 0;
  sigwait(&set, &sig);
  Log(LogLevel::kInfo, "m3-engine: signal ", sig, ": no new requests; finishing running ones");
  core.StopAdmission();
  // A second signal while draining stops at once; otherwise the waiter's own signal ends the
  // wait once the engine is idle.
  std::atomic<bool> drained{false}, abandon{false};
  std::thread waiter([&] {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(options.drain_timeout_s);
    while (!core.Idle() && !abandon && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (abandon) return;
    drained = true;
    kill(getpid(), SIGTERM);
  });
  sigwait(&set, &sig);
  abandon = true;
  waiter.join();
  if (!drained) Log(LogLevel::kWarn, "m3-engine: second signal: stopping now");
  // Streams already finished in the engine still flush their last messages.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(drained ? 5 : 0));
  Log(LogLevel::kInfo, "m3-engine: stopped");
  return 0;
}

}  // namespace m3::engine::server
