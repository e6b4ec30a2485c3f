// `m3-gateway serve`: the gateway's server. By default the OpenAI-compatible API
// (gateway/api) in front of one or more `m3-engine serve` workers (--engine HOST:PORT, each
// one's ModelInfo checked against --model at start); its first stdout line announces
// "http=HOST:PORT". With --preprocess-only it runs the preprocessing service alone: POST
// /v1/preprocess and GET /health over HTTP, and the gRPC Preprocess service on --grpc-port.
// Media work runs on bounded worker pools either way. SIGTERM/SIGINT stop it gracefully: no
// new connections, requests in flight are answered (up to --shutdown-grace-ms), then exit 0.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include "gateway/api/api_server.h"
#include "gateway/api/serving_context.h"
#include "gateway/cli/command.h"
#include "gateway/cli/fetch_flags.h"
#include "gateway/engine_client/engine_router.h"
#include "gateway/media/media_preprocessor.h"
#include "gateway/net/http_server.h"
#include "gateway/net/media_fetcher.h"
#include "gateway/net/memory_budget.h"
#include "gateway/net/worker_pool.h"
#include "gateway/openai/chat_template_kwargs.h"
#include "gateway/preprocess/grpc_preprocess_service.h"
#include "gateway/preprocess/preprocess_http.h"
#include "gateway/preprocess/preprocess_limits.h"
#include "gateway/preprocess/preprocess_service.h"
#include "gateway/template/chat_template.h"
#include "gateway/text/chat_format.h"
#include "gateway/text/prompt_builder.h"
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
  int64_t max_body_bytes = 64ll << 20;
  int64_t read_timeout_ms = 30000;
  int max_connections = 1024;
  int64_t max_inflight_bytes = 768ll << 20;
  int fetch_threads = 16;
  int64_t request_timeout_ms = 60000;
  preprocess::PreprocessLimits limits;
  FetchFlags fetch_flags;
  net::FetchOptions fetch;  // resolved from fetch_flags after parsing
  bool jpeg_draft = false;
  int64_t shutdown_grace_ms = 10000;
  // The API server (not --preprocess-only).
  std::vector<std::string> engines;
  std::string served_model_name;
  std::vector<std::string> api_keys;
  std::string engine_api_key;  // sent to the engines (m3-engine serve --api-key)
  bool ready_details = false;
  int64_t max_media_items = 32;
  int64_t max_concurrent_requests = 1024;
  int64_t health_interval_ms = 1000;
  int engine_retries = 2;
  int64_t probe_timeout_ms = 1000;
  std::string routing = "least-load";
  // The output formats: "auto" reads them from the chat template (text/chat_format.h).
  std::string reasoning_parser = "auto";
  std::string tool_call_parser = "auto";
  // JSON object of chat template variables every chat request starts from.
  std::string default_chat_template_kwargs;
};

// --default-chat-template-kwargs: a JSON object, checked as a request's chat_template_kwargs.
nlohmann::ordered_json ParseDefaultChatTemplateKwargs(const std::string& text) {
  if (text.empty()) return nlohmann::ordered_json::object();
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::parse(text, nullptr, false);
  Require(!kwargs.is_discarded(), ErrorCode::kInvalidArgument,
          "--default-chat-template-kwargs: not valid JSON: " + text);
  openai::CheckChatTemplateKwargs(kwargs, "--default-chat-template-kwargs");  // throws naming it
  return kwargs;
}

// The connection cap that fits the descriptor limit: the soft limit is raised to the hard one
// (as servers commonly do), and 128 descriptors are kept for fetches, files and gRPC.
int ConnectionCap(int wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return wanted;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur == RLIM_INFINITY) return wanted;
  const int64_t room = static_cast<int64_t>(limit.rlim_cur) - 128;
  if (room < wanted) {
    Log(LogLevel::kWarn, "serve: the descriptor limit (", static_cast<int64_t>(limit.rlim_cur),
        ") allows ", std::max<int64_t>(room, 16), " connections, not ", wanted);
  }
  return static_cast<int>(std::min<int64_t>(wanted, std::max<int64_t>(room, 16)));
}

// Blocks until SIGTERM/SIGINT arrives through the pipe (the signals are unblocked on this
// thread only); returns the signal.
int WaitForShutdownSignal(const sigset_t& signals) {
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  unsigned char sig = 0;
  while (::read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
  }
  return sig;
}

// The OpenAI API server on the engines, until a shutdown signal.
int RunApiServer(const ServeArgs& a, const net::HttpServerOptions& http_options,
                 std::shared_ptr<const preprocess::PreprocessService> service,
                 std::shared_ptr<const media::MediaPreprocessor> preprocessor,
                 const preprocess::PreprocessPools& pools, const sigset_t& signals) {
  api::ApiOptions options;
  options.model_dir = a.model_dir;
  options.served_model_name = a.served_model_name;
  options.api_keys = a.api_keys;
  options.ready_details = a.ready_details;
  for (const std::string& key : options.api_keys) {
    Require(!key.empty(), ErrorCode::kInvalidArgument, "an --api-key is empty");
  }
  options.limits.max_body_bytes = static_cast<size_t>(a.max_body_bytes);
  options.limits.max_media_items = static_cast<size_t>(a.max_media_items);
  options.max_concurrent_requests = a.max_concurrent_requests;
  // The reasoning and tool-call formats the model speaks (the flags override the template's),
  // decided before any engine is contacted so a bad template or flag fails the start at once.
  const text::ChatFormat chat_format = text::ResolveChatFormat(
      tmpl::LoadChatTemplateSource(a.model_dir), a.reasoning_parser, a.tool_call_parser);
  Log(LogLevel::kInfo, "serve: reasoning parser ", text::ReasoningSyntaxName(chat_format.reasoning),
      ", tool-call parser ", text::ToolCallSyntaxName(chat_format.tool_calls));
  options.chat_format = chat_format;
  options.default_chat_template_kwargs =
      ParseDefaultChatTemplateKwargs(a.default_chat_template_kwargs);

  engine_client::RouterOptions router_options;
  router_options.health_interval = std::chrono::milliseconds(a.health_interval_ms);
  router_options.endpoint.probe_timeout = std::chrono::milliseconds(a.probe_timeout_ms);
  router_options.routing = *engine_client::ParseRoutingPolicy(a.routing);  // checked by the flag
  router_options.endpoint.api_key = a.engine_api_key;
  router_options.max_retries = a.engine_retries;
  router_options.endpoint.max_message_bytes =
      std::max<int64_t>(a.limits.max_output_bytes + (16 << 20), int64_t{64} << 20);
  // The tokenizer's vocabulary (added tokens included) is checked against each engine's
  // ModelInfo at start, so it is loaded here before the serving context loads it for good.
  const auto tokenizer_size =
      static_cast<int64_t>(text::PromptBuilder::FromModelDir(a.model_dir).tokenizer().VocabSize());
  engine_client::EngineRouter router(
      a.engines, engine_client::LoadExpectedModel(a.model_dir, tokenizer_size), router_options);
  const size_t healthy = router.Start();  // throws naming an engine of another model
  if (healthy == 0) {
    Log(LogLevel::kWarn, "serve: no engine is healthy yet; /ready answers 503 until one is");
  }
  auto ctx =
      std::make_shared<const api::ServingContext>(options, router, service, preprocessor, pools);
  auto api_server = std::make_shared<api::ApiServer>(ctx);
  net::HttpServerOptions counted_options = http_options;
  counted_options.on_refusal = api_server->RefusalCounter();
  counted_options.deadline_response = api_server->ShutdownResponse();
  net::HttpServer http(counted_options, api_server->Handler(), api_server->HeaderCheck());
  http.Start();
  std::printf("m3-gateway serve: http=%s:%u model=%s engines=%zu healthy=%zu routing=%s\n",
              a.host.c_str(), http.port(), ctx->model_name().c_str(), a.engines.size(), healthy,
              a.routing.c_str());
  std::fflush(stdout);

  const int sig = WaitForShutdownSignal(signals);
  Log(LogLevel::kInfo, "serve: signal ", sig, ", shutting down");
  http.StopAccepting();
  http.Stop(std::chrono::milliseconds(a.shutdown_grace_ms), [&router] {
    // Generations still running when the grace period is over end with an error their clients
    // can read (a stream: the error event, then its end) rather than a bare close.
    const size_t ended = router.generations().AbortAll(
        "the server is shutting down: the generation did not finish within the grace period");
    if (ended > 0) Log(LogLevel::kWarn, "serve: ", ended, " generations cut at the grace period");
  });
  pools.fetch->Shutdown();
  pools.workers->Shutdown();
  // Responses are all sent. The process ends here without unwinding the gRPC client state:
  // engine streams cancelled at the deadline may still be completing on gRPC's threads, and
  // tearing the channels down under them is what aborts inside gRPC at exit (see
  // tests/openai/CMakeLists.txt); there is nothing left to flush but stdio.
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);
}

int RunServe(int argc, char** argv) {
  ServeArgs a;
  CLI::App app{
      "Serve the OpenAI-compatible API: m3-gateway serve --model DIR --engine HOST:PORT "
      "[--engine ...]. --preprocess-only runs the media preprocessing service alone."};
  app.add_flag("--preprocess-only", a.preprocess_only, "serve only /v1/preprocess (no engine)");
  app.add_option("--host", a.host, "listen address")->capture_default_str();
  app.add_option("--port", a.port, "HTTP port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--grpc-port", a.grpc_port,
                 "gRPC port for the Preprocess service (0: any free port; unset: off)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--model", a.model_dir,
                 "model directory (tokenizer, chat template, configs; --preprocess-only: only "
                 "the preprocessor configs)");
  app.add_option("--workers", a.workers, "media worker threads (default: hardware threads)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--queue-limit", a.queue_limit,
                 "requests waiting for a worker (and, apart, for a fetch thread) before 429")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--http-threads", a.http_threads, "network threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--max-body-bytes", a.max_body_bytes, "HTTP request body limit")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--read-timeout-ms", a.read_timeout_ms, "HTTP request read timeout")
      ->capture_default_str();
  app.add_option("--max-connections", a.max_connections,
                 "open client connections (more get 503; also bounded by the descriptor limit)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-inflight-bytes", a.max_inflight_bytes,
                 "memory budget of all requests in flight: bodies, fetched media, outputs "
                 "(over it: 429)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 50));
  app.add_option("--fetch-threads", a.fetch_threads,
                 "threads parsing large request bodies and admitting /v1/preprocess requests "
                 "(remote media wait on the shared network threads, not on these)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--max-items", a.limits.max_items, "media items per request")
      ->capture_default_str();
  app.add_option("--max-request-pixels", a.limits.max_pixels,
                 "resized pixels per request, all items and frames (bounds max_pixels too)")
      ->capture_default_str();
  app.add_option("--max-output-bytes", a.limits.max_output_bytes,
                 "bytes of output tensors per request")
      ->capture_default_str();
  app.add_option("--request-timeout-ms", a.request_timeout_ms,
                 "time for all media fetches of one request")
      ->capture_default_str();
  a.fetch_flags.Add(app);
  app.add_flag("--jpeg-draft", a.jpeg_draft,
               "decode JPEGs at reduced DCT scale when the resize target allows (faster, not "
               "bit-exact with the reference)");
  app.add_option("--shutdown-grace-ms", a.shutdown_grace_ms, "time to finish requests on SIGTERM")
      ->capture_default_str();
  app.add_option("--engine", a.engines, "HOST:PORT of an m3-engine serve worker (repeatable)");
  app.add_option("--served-model-name", a.served_model_name,
                 "the model name clients send (default: the model directory's name)");
  app.add_option("--api-key", a.api_keys,
                 "accepted API key, sent as 'Authorization: Bearer KEY' (repeatable; none: no "
                 "authentication)")
      ->envname("M3_API_KEY");
  app.add_option("--engine-api-key", a.engine_api_key,
                 "the engines' shared key (m3-engine serve --api-key), sent on every engine RPC as "
                 "'authorization: Bearer KEY'; the environment variable keeps it out of ps")
      ->envname("M3_ENGINE_API_KEY");
  app.add_flag("--ready-details", a.ready_details,
               "/ready shows every caller the engines' addresses, loads and errors (default: only "
               "callers with an --api-key; others see states and counts)");
  app.add_option("--max-images-per-request", a.max_media_items,
                 "image and video parts per chat request (more: 413)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--max-concurrent-requests", a.max_concurrent_requests,
                 "generation requests in flight at once (more: 429)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--health-interval-ms", a.health_interval_ms,
                 "time between engine health probes (ejection and re-admission)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{10}, int64_t{3600000}));
  app.add_option("--engine-retries", a.engine_retries,
                 "other engines a request is tried on when its engine dies before anything "
                 "reached the client (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_option("--routing", a.routing,
                 "how requests are spread over the engines: least-load (fewest outstanding), "
                 "round-robin, or cache-aware (prefix affinity, falling back to load)")
      ->capture_default_str()
      ->check(CLI::IsMember({"least-load", "round-robin", "cache-aware"}));
  app.add_option("--engine-probe-timeout-ms", a.probe_timeout_ms,
                 "deadline of one engine health probe")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{10}, int64_t{600000}));
  const std::vector<std::string> parsers = {"auto",       "minimax_m2", "minimax_m3",
                                            "minimax-m2", "minimax-m3", "none"};
  app.add_option("--reasoning-parser", a.reasoning_parser,
                 "reasoning format of the model's output: auto (from the chat template: "
                 "<mm:think> is minimax_m3, else minimax_m2), minimax_m2 (<think>), minimax_m3 "
                 "(<mm:think>), none (reasoning stays in content)")
      ->capture_default_str()
      ->check(CLI::IsMember(parsers));
  app.add_option("--tool-call-parser", a.tool_call_parser,
                 "tool-call format of the model's output: auto (from the chat template), "
                 "minimax_m2 (<minimax:tool_call>), minimax_m3 (]<]minimax[>[<tool_call>), none")
      ->capture_default_str()
      ->check(CLI::IsMember(parsers));
  app.add_option("--default-chat-template-kwargs", a.default_chat_template_kwargs,
                 "JSON object of chat template variables for every chat request, e.g. "
                 "'{\"thinking_mode\": \"enabled\"}' (MiniMax-M3: enabled, disabled or "
                 "adaptive); a request's chat_template_kwargs override them key by key");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!a.preprocess_only) {
    Require(!a.model_dir.empty(), ErrorCode::kInvalidArgument,
            "serve needs --model DIR (or --preprocess-only)");
    Require(!a.engines.empty(), ErrorCode::kInvalidArgument,
            "serve needs at least one --engine HOST:PORT (or --preprocess-only)");
    Require(a.grpc_port < 0, ErrorCode::kInvalidArgument,
            "--grpc-port (the gRPC Preprocess service) is served with --preprocess-only only");
  } else {
    Require(a.engines.empty(), ErrorCode::kInvalidArgument,
            "--engine has no use with --preprocess-only");
  }
  Require(a.max_body_bytes > 0 && a.read_timeout_ms > 0 && a.max_inflight_bytes > 0 &&
              a.request_timeout_ms > 0 && a.limits.max_items > 0 && a.limits.max_pixels > 0 &&
              a.limits.max_output_bytes > 0,
          ErrorCode::kInvalidArgument, "limits and timeouts must be positive");
  a.limits.request_timeout = std::chrono::milliseconds(a.request_timeout_ms);
  const int max_connections = ConnectionCap(a.max_connections);
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

  auto memory = std::make_shared<net::MemoryBudget>(a.max_inflight_bytes);
  auto fetcher = std::make_shared<const net::MediaFetcher>(a.fetch);
  media::MediaLimits limits;
  limits.max_encoded_bytes = std::max(a.fetch.max_image_bytes, a.fetch.max_video_bytes);
  limits.jpeg_draft = a.jpeg_draft;
  auto preprocessor = std::make_shared<const media::MediaPreprocessor>(
      media::LoadVisionProcessor(a.model_dir), limits);
  auto service = std::make_shared<const preprocess::PreprocessService>(fetcher, preprocessor,
                                                                       a.limits, memory);
  // Media workers at a lower priority than the network and fetch threads (see WorkerPool).
  preprocess::PreprocessPools pools{
      std::make_shared<net::WorkerPool>(workers, a.queue_limit, 10),
      std::make_shared<net::WorkerPool>(a.fetch_threads, a.queue_limit)};

  net::HttpServerOptions http_options;
  http_options.host = a.host;
  http_options.port = static_cast<uint16_t>(a.port);
  http_options.threads = a.http_threads;
  http_options.max_body_bytes = static_cast<uint64_t>(a.max_body_bytes);
  http_options.read_timeout = std::chrono::milliseconds(a.read_timeout_ms);
  http_options.max_connections = max_connections;
  http_options.memory = memory;
  // A body, the JSON parser's buffer for its largest string and the parsed string itself.
  http_options.body_charge_factor = 3;
  if (!a.preprocess_only) {
    return RunApiServer(a, http_options, service, preprocessor, pools, signals);
  }
  net::HttpServer http(http_options, preprocess::MakePreprocessHttpHandler(service, pools),
                       preprocess::MakePreprocessHeaderCheck(pools));
  http.Start();

  std::unique_ptr<preprocess::GrpcPreprocessService> grpc_service;
  std::unique_ptr<grpc::Server> grpc_server;
  int grpc_port = 0;
  if (a.grpc_port >= 0) {
    grpc_service = std::make_unique<preprocess::GrpcPreprocessService>(service, pools);
    grpc::ServerBuilder builder;
    std::string address = (a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host) +
                          ":" + std::to_string(a.grpc_port);
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &grpc_port);
    builder.SetMaxReceiveMessageSize(
        static_cast<int>(std::min<int64_t>(a.max_body_bytes, INT32_MAX)));
    // Responses are bounded by --max-output-bytes (plus grids and timestamps). gRPC clients
    // receive at most 4 MB by default, less than one 640x480 image's tensor: clients must raise
    // their limit (max_receive_message_length) to this.
    builder.SetMaxSendMessageSize(
        static_cast<int>(std::min<int64_t>(a.limits.max_output_bytes + (16 << 20), INT32_MAX)));
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

  const int sig = WaitForShutdownSignal(signals);
  Log(LogLevel::kInfo, "serve: signal ", sig, ", shutting down");
  http.StopAccepting();
  auto grace = std::chrono::milliseconds(a.shutdown_grace_ms);
  if (grpc_server) grpc_server->Shutdown(std::chrono::system_clock::now() + grace);
  pools.fetch->Shutdown();    // fetches finish (and hand their decoding to the workers)
  pools.workers->Shutdown();  // finishes queued and running work; their responses are posted
  http.Stop(grace);
  return 0;
}

const CommandRegistrar kRegister(
    {"serve",
     "serve the OpenAI-compatible API on m3-engine workers (--preprocess-only: the media "
     "preprocessing service alone)",
     RunServe});

}  // namespace
}  // namespace m3::cli
