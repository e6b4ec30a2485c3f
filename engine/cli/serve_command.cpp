// RunServe: flags -> EngineConfig, the model runner, the engine core, the gRPC server. On a GPU
// the KV cache is sized from the memory left after the weights (--gpu-memory-fraction).
#include "engine/cli/serve_command.h"

#include <filesystem>

#include "engine/cli/arg_parser.h"
#include "engine/runtime/engine_core.h"
#include "engine/server/engine_server.h"
#include "shared/error.h"
#include "shared/generation_config.h"

namespace m3::engine::cli {

int RunServe(const std::vector<std::string>& args) {
  server::InstallShutdownHandlers();
  ArgParser p;
  for (const char* o :
       {"model", "port", "host", "device", "max-num-seqs", "max-batched-tokens", "kv-pages",
        "kv-memory", "page-size", "max-prefill-chunk", "max-waiting", "encoder-cache-mb",
        "max-message-mb", "served-model-name", "gpu-memory-fraction", "cuda-graphs",
        "tensor-parallel", "expert-parallel", "index-key-cache"})
    p.AddOption(o);
  p.AddFlag("no-prefix-caching");
  p.Parse(args);
  const std::string model_dir = p.Required("model");
  const int64_t port = p.Int("port", -1);
  Require(port >= 0 && port <= 65535, ErrorCode::kInvalidArgument,
          "--port must be in [0, 65535] (0: any free port)");
  Require(!(p.Has("kv-pages") && p.Has("kv-memory")), ErrorCode::kInvalidArgument,
          "give --kv-pages or --kv-memory, not both");
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = p.Int("max-num-seqs", 64);
  cfg.scheduler.max_batched_tokens = p.Int("max-batched-tokens", 2048);
  cfg.scheduler.max_prefill_chunk = p.Int("max-prefill-chunk", 0);
  cfg.scheduler.max_waiting = p.Int("max-waiting", 1024);
  Require(cfg.scheduler.max_num_seqs > 0, ErrorCode::kInvalidArgument,
          "--max-num-seqs must be > 0");
  Require(cfg.scheduler.max_batched_tokens > 0, ErrorCode::kInvalidArgument,
          "--max-batched-tokens must be > 0");
  Require(cfg.scheduler.max_prefill_chunk >= 0, ErrorCode::kInvalidArgument,
          "--max-prefill-chunk must be >= 0");
  Require(cfg.scheduler.max_waiting > 0, ErrorCode::kInvalidArgument, "--max-waiting must be > 0");
  cfg.kv_pages = p.Int("kv-pages", 0);
  Require(cfg.kv_pages >= 0, ErrorCode::kInvalidArgument, "--kv-pages must be > 0");
  const double gib = p.Double("kv-memory", 0);
  Require(gib >= 0 && gib < 1e5, ErrorCode::kInvalidArgument, "--kv-memory must be in GiB, > 0");
  cfg.kv_memory_bytes = static_cast<int64_t>(gib * (1 << 30));
  cfg.page_size = p.Int("page-size", 0);
  Require(cfg.page_size >= 0, ErrorCode::kInvalidArgument, "--page-size must be > 0");
  cfg.prefix_caching = !p.Has("no-prefix-caching");
  cfg.encoder_cache_bytes = p.Int("encoder-cache-mb", 512) << 20;
  cfg.generation = LoadGenerationConfig(model_dir);

  server::ServerOptions so;
  so.address = p.Get("host").value_or("0.0.0.0") + ":" + std::to_string(port);
  so.model_name = p.Get("served-model-name")
                      .value_or(std::filesystem::path(model_dir).lexically_normal().filename());
  if (so.model_name.empty())
    so.model_name = std::filesystem::path(model_dir).lexically_normal().parent_path().filename();
  const int64_t mb = p.Int("max-message-mb", 1024);
  Require(mb > 0 && mb <= 2047, ErrorCode::kInvalidArgument,
          "--max-message-mb must be in [1, 2047]");
  so.max_message_bytes = mb << 20;

  RunnerOptions ro;
  ro.device = p.Get("device").value_or("cpu");
  const bool gpu = ro.device != "cpu";
  ro.max_num_seqs = cfg.scheduler.max_num_seqs;
  ro.max_batched_tokens = cfg.scheduler.max_batched_tokens;
  const std::string graphs = p.Get("cuda-graphs").value_or("on");
  Require(graphs == "on" || graphs == "off", ErrorCode::kInvalidArgument,
          "--cuda-graphs must be 'on' or 'off', not '" + graphs + "'");
  Require(gpu || !p.Has("cuda-graphs"), ErrorCode::kInvalidArgument,
          "--cuda-graphs needs a GPU --device (cuda or cuda:N)");
  ro.cuda_graphs = graphs == "on";
  ro.fp8_index_keys = p.Choice("index-key-cache", {"bf16", "fp8"}, "bf16") == "fp8";
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
  const int64_t tp = p.Int("tensor-parallel", 1), ep = p.Int("expert-parallel", 1);
  Require(tp >= 1 && tp <= 64, ErrorCode::kInvalidArgument, "--tensor-parallel must be in [1, 64]");
  Require(ep >= 1 && ep <= 64, ErrorCode::kInvalidArgument, "--expert-parallel must be in [1, 64]");
  Require(tp == 1 || ep == 1 || tp == ep, ErrorCode::kInvalidArgument,
          "--tensor-parallel " + std::to_string(tp) + " and --expert-parallel " +
              std::to_string(ep) +
              ": when both are above 1 they must be equal (one group of ranks)");
  ro.tensor_parallel = static_cast<int>(tp);
  ro.expert_parallel = static_cast<int>(ep);
  EngineCore core(LoadModelRunner(model_dir, ro), cfg);
  return server::RunServer(core, so);
}

}  // namespace m3::engine::cli
