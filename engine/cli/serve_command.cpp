// RunServe: flags -> EngineConfig, the model runner, the engine core, the gRPC server. On a GPU
// the KV cache is sized from the memory left after the weights (--gpu-memory-fraction).
#include "engine/cli/serve_command.h"

#include <cstdlib>
#include <filesystem>

#include "engine/cli/arg_parser.h"
#include "engine/cli/cache_options.h"
#include "engine/cli/speculative_options.h"
#include "engine/model_registry.h"
#include "engine/runtime/engine_core.h"
#include "engine/server/engine_server.h"
#include "shared/error.h"
#include "shared/generation_config.h"

namespace m3::engine::cli {

int RunServe(const std::vector<std::string>& args) {
  server::InstallShutdownHandlers();
  ArgParser p;
  for (const char* o : {"model",
                        "port",
                        "host",
                        "device",
                        "max-num-seqs",
                        "max-batched-tokens",
                        "kv-pages",
                        "kv-memory",
                        "page-size",
                        "max-prefill-chunk",
                        "max-waiting",
                        "encoder-cache-mb",
                        "max-message-mb",
                        "served-model-name",
                        "gpu-memory-fraction",
                        "cuda-graphs",
                        "tensor-parallel",
                        "expert-parallel",
                        "index-key-cache",
                        "api-key"})
    p.AddOption(o);
  p.AddOption("load-format");
  p.AddOption("all-reduce");
  p.AddOption("kv-cache-dtype");
  p.AddFlag("no-prefix-caching");
  AddSpeculativeOptions(p);
  p.Parse(args);
  const std::string model_dir = p.Required("model");
  Require(p.Has("port"), ErrorCode::kInvalidArgument, "--port is required (0: any free port)");
  const int64_t port = p.IntIn("port", 0, 0, 65535);
  Require(!(p.Has("kv-pages") && p.Has("kv-memory")), ErrorCode::kInvalidArgument,
          "give --kv-pages or --kv-memory, not both");
  EngineConfig cfg;
  // Bounds far above any real deployment, so that the sizes they multiply into stay exact.
  constexpr int64_t kMaxTokens = int64_t{1} << 24;
  cfg.scheduler.max_num_seqs = p.IntIn("max-num-seqs", 64, 1, int64_t{1} << 16);
  cfg.scheduler.max_batched_tokens = p.IntIn("max-batched-tokens", 2048, 1, kMaxTokens);
  cfg.scheduler.max_prefill_chunk = p.IntIn("max-prefill-chunk", 0, 0, kMaxTokens);
  cfg.scheduler.max_waiting = p.IntIn("max-waiting", 1024, 1, kMaxTokens);
  cfg.kv_pages = p.IntIn("kv-pages", 0, 0, int64_t{1} << 31);  // 0: sized from memory
  const double gib = p.Double("kv-memory", 0);
  Require(gib >= 0 && gib < 1e5, ErrorCode::kInvalidArgument, "--kv-memory must be in GiB, > 0");
  cfg.kv_memory_bytes = static_cast<int64_t>(gib * (1 << 30));
  cfg.page_size = p.IntIn("page-size", 0, 0, int64_t{1} << 16);  // 0: the MSA block size
  cfg.prefix_caching = !p.Has("no-prefix-caching");
  cfg.encoder_cache_bytes = p.IntIn("encoder-cache-mb", 512, 0, int64_t{1} << 30) << 20;
  cfg.generation = LoadGenerationConfig(model_dir);
  cfg.speculative = SpeculativeOptions(p);
  cfg.speculative.target_model_dir = model_dir;

  server::ServerOptions so;
  // Loopback unless --host says otherwise: an engine has no authentication of its own unless
  // given a key, and only the gateway should reach it.
  const std::string host = p.Get("host").value_or("127.0.0.1");
  Require(!host.empty(), ErrorCode::kInvalidArgument, "--host is empty");
  so.address =
      (host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host) + ":" +
      std::to_string(port);
  // The key from the environment keeps it out of `ps`; --api-key wins when both are given.
  if (p.Has("api-key")) {
    so.api_key = *p.Get("api-key");
    Require(!so.api_key.empty(), ErrorCode::kInvalidArgument, "--api-key is empty");
  } else if (const char* env = std::getenv("M3_ENGINE_API_KEY")) {
    so.api_key = env;
  }
  so.model_name = p.Get("served-model-name")
                      .value_or(std::filesystem::path(model_dir).lexically_normal().filename());
  if (so.model_name.empty())
    so.model_name = std::filesystem::path(model_dir).lexically_normal().parent_path().filename();
  // Unset: sized from the model's largest legal request once it is loaded (message_limit.h).
  so.max_message_bytes = p.IntIn("max-message-mb", 0, 0, 2047) << 20;
  so.model_dir = model_dir;

  RunnerOptions ro;
  ro.device = p.Get("device").value_or("cpu");
  const bool gpu = ro.device != "cpu";
  ro.max_num_seqs = cfg.scheduler.max_num_seqs;
  ro.max_batched_tokens = cfg.scheduler.max_batched_tokens;
  if (cfg.speculative.enabled()) ro.max_logits_per_seq = 1 + cfg.speculative.num_speculative_tokens;
  const std::string graphs = p.Get("cuda-graphs").value_or("on");
  Require(graphs == "on" || graphs == "off", ErrorCode::kInvalidArgument,
          "--cuda-graphs must be 'on' or 'off', not '" + graphs + "'");
  Require(gpu || !p.Has("cuda-graphs"), ErrorCode::kInvalidArgument,
          "--cuda-graphs needs a GPU --device (cuda or cuda:N)");
  ro.cuda_graphs = graphs == "on";
  if (cfg.speculative.method == spec::SpeculativeMethod::kEagle3) ro.draft_hidden_layers = 3;
  cfg.speculative.uniform_drafts = gpu && ro.cuda_graphs;
  // The CPU reference pays for every row (a 4-row verify step cost about 2 decode steps on the
  // demo model): its back-off counts 2 rows a step at one row's cost, a GPU's 32.
  if (!gpu) cfg.speculative.backoff_free_rows = 2;
  ApplyCacheOptions(p, ro);
  ro.dummy_weights = p.Choice("load-format", {"auto", "safetensors", "dummy"}, "auto") == "dummy";
  Require(gpu || !p.Has("gpu-memory-fraction"), ErrorCode::kInvalidArgument,
          "--gpu-memory-fraction needs a GPU --device (cuda or cuda:N)");
  Require(!(p.Has("gpu-memory-fraction") && (p.Has("kv-pages") || p.Has("kv-memory"))),
          ErrorCode::kInvalidArgument,
          "give --gpu-memory-fraction or --kv-pages / --kv-memory, not both");
  const double fraction = p.Double("gpu-memory-fraction", 0.9);
  Require(fraction > 0 && fraction <= 1, ErrorCode::kInvalidArgument,
          "--gpu-memory-fraction must be in (0, 1]");
  if (gpu && !p.Has("kv-pages") && !p.Has("kv-memory")) cfg.gpu_memory_fraction = fraction;
  // Divisibility by the model's heads / experts and the devices are checked at load, naming
  // what conflicts.
  const int64_t tp = p.IntIn("tensor-parallel", 1, 1, 64);
  const int64_t ep = p.IntIn("expert-parallel", 1, 1, 64);
  Require(tp == 1 || ep == 1 || tp == ep, ErrorCode::kInvalidArgument,
          "--tensor-parallel " + std::to_string(tp) + " and --expert-parallel " +
              std::to_string(ep) +
              ": when both are above 1 they must be equal (one group of ranks)");
  ro.tensor_parallel = static_cast<int>(tp);
  ro.expert_parallel = static_cast<int>(ep);
  ro.all_reduce = p.Choice("all-reduce", {"auto", "nccl", "custom"}, "auto");
  Require(gpu || !p.Has("all-reduce"), ErrorCode::kInvalidArgument,
          "--all-reduce needs a GPU --device (cuda or cuda:N)");
  EngineCore core(LoadModelRunner(model_dir, ro), cfg);
  return server::RunServer(core, so);
}

}  // namespace m3::engine::cli
