// `m3-gateway serve`: the gateway's server. With --preprocess-only it runs the preprocessing
// service alone: POST /v1/preprocess and GET /health over HTTP, and the gRPC Preprocess
// service on --grpc-port, with media work on a bounded worker pool. SIGTERM/SIGINT stop it
// gracefully: no new connections, requests in flight are answered, then exit 0.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include "gateway/cli/command.h"
#include "gateway/cli/fetch_flags.h"
#include "gateway/media/media_preprocessor.h"
#include "gateway/net/grpc_preprocess_service.h"
#include "gateway/net/http_server.h"
#include "gateway/net/media_fetcher.h"
#include "gateway/net/preprocess_http.h"
#include "gateway/net/preprocess_service.h"
#include "gateway/net/worker_pool.h"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::cli {
namespace {

int g_signal_pipe[2] = {-1, -1};

void OnShutdownSignal(int sig) {
  int saved = errno;
  unsigned char c = static_cast<unsigned char>(sig);
  (void)!::write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

struct ServeArgs {
  bool preprocess_only = false;
  std::string host = "127.0.0.1";
  int port = 8000;
  int grpc_port = -1;
  std::string model_dir;
  int workers = 0;
  int queue_limit = 64;
  int http_threads = 2;
  int64_t max_body_bytes = 256ll << 20;
  int64_t read_timeout_ms = 30000;
  FetchFlags fetch_flags;
  net::FetchOptions fetch;  // resolved from fetch_flags after parsing
  bool jpeg_draft = false;
  int64_t shutdown_grace_ms = 10000;
};

int RunServe(int argc, char** argv) {
  ServeArgs a;
  CLI::App app{"Serve the gateway. --preprocess-only runs the media preprocessing service."};
  app.add_flag("--preprocess-only", a.preprocess_only, "serve only /v1/preprocess (no engine)");
  app.add_option("--host", a.host, "listen address")->capture_default_str();
  app.add_option("--port", a.port, "HTTP port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--grpc-port", a.grpc_port,
                 "gRPC port for the Preprocess service (0: any free port; unset: off)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--model", a.model_dir, "model directory (preprocessor configs)");
  app.add_option("--workers", a.workers, "media worker threads (default: hardware threads)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--queue-limit", a.queue_limit, "requests waiting for a worker before 429")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--http-threads", a.http_threads, "network threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--max-body-bytes", a.max_body_bytes, "HTTP request body limit")
      ->capture_default_str();
  app.add_option("--read-timeout-ms", a.read_timeout_ms, "HTTP request read timeout")
      ->capture_default_str();
  a.fetch_flags.Add(app);
  app.add_flag("--jpeg-draft", a.jpeg_draft,
               "decode JPEGs at reduced DCT scale when the resize target allows (faster, not "
               "bit-exact with the reference)");
  app.add_option("--shutdown-grace-ms", a.shutdown_grace_ms, "time to finish requests on SIGTERM")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!a.preprocess_only) {
    throw Error(
        ErrorCode::kUnsupported,
        "serve needs --preprocess-only in this build (the engine-backed API is not wired yet)");
  }
  Require(a.max_body_bytes > 0 && a.read_timeout_ms > 0, ErrorCode::kInvalidArgument,
          "limits and timeouts must be positive");
  a.fetch = a.fetch_flags.Resolve();
  int workers = a.workers > 0 ? a.workers : std::max(1u, std::thread::hardware_concurrency());

  // Shutdown signals: the handler only writes to a pipe that this thread waits on. Threads we
  // start inherit a mask that blocks the signals, so they land on this thread (or on threads
  // libraries started before main, e.g. a BLAS pool, where the handler is just as harmless);
  // never on the default action, which would kill the process mid-request.
  Require(::pipe2(g_signal_pipe, O_CLOEXEC) == 0, ErrorCode::kInternal,
          "cannot create the signal pipe");
  struct sigaction action {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto fetcher = std::make_shared<const net::MediaFetcher>(a.fetch);
  media::MediaLimits limits;
  limits.max_encoded_bytes = std::max(a.fetch.max_image_bytes, a.fetch.max_video_bytes);
  limits.jpeg_draft = a.jpeg_draft;
  auto preprocessor = std::make_shared<const media::MediaPreprocessor>(
      media::LoadVisionProcessor(a.model_dir), limits);
  auto service = std::make_shared<const net::PreprocessService>(fetcher, preprocessor);
  auto pool = std::make_shared<net::WorkerPool>(workers, a.queue_limit);

  net::HttpServerOptions http_options;
  http_options.host = a.host;
  http_options.port = static_cast<uint16_t>(a.port);
  http_options.threads = a.http_threads;
  http_options.max_body_bytes = static_cast<uint64_t>(a.max_body_bytes);
  http_options.read_timeout = std::chrono::milliseconds(a.read_timeout_ms);
  net::HttpServer http(http_options, net::MakePreprocessHttpHandler(service, pool));
  http.Start();

  std::unique_ptr<net::GrpcPreprocessService> grpc_service;
  std::unique_ptr<grpc::Server> grpc_server;
  int grpc_port = 0;
  if (a.grpc_port >= 0) {
    grpc_service = std::make_unique<net::GrpcPreprocessService>(service, pool);
    grpc::ServerBuilder builder;
    std::string address = (a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host) +
                          ":" + std::to_string(a.grpc_port);
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &grpc_port);
    builder.SetMaxReceiveMessageSize(
        static_cast<int>(std::min<int64_t>(a.max_body_bytes, INT32_MAX)));
    builder.RegisterService(grpc_service.get());
    grpc_server = builder.BuildAndStart();
    Require(grpc_server != nullptr && grpc_port > 0, ErrorCode::kUnavailable,
            "cannot start the gRPC server on " + address);
  }

  std::printf("m3-gateway serve: preprocess-only http=%s:%u grpc=%s workers=%d queue_limit=%d\n",
              a.host.c_str(), http.port(),
              grpc_server ? (a.host + ":" + std::to_string(grpc_port)).c_str() : "off", workers,
              a.queue_limit);
  std::fflush(stdout);

  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  unsigned char sig = 0;
  while (::read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
  }
  Log(LogLevel::kInfo, "serve: signal ", static_cast<int>(sig), ", shutting down");
  http.StopAccepting();
  auto grace = std::chrono::milliseconds(a.shutdown_grace_ms);
  if (grpc_server) grpc_server->Shutdown(std::chrono::system_clock::now() + grace);
  pool->Shutdown();  // finishes queued and running work; their responses are posted
  http.Stop(grace);
  return 0;
}

const CommandRegistrar kRegister(
    {"serve", "serve the gateway (--preprocess-only: media preprocessing service)", RunServe});

}  // namespace
}  // namespace m3::cli
