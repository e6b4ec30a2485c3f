// --kv-cache-dtype: `auto` keeps today's storage (the device's activation dtype: bf16 on a GPU,
// float32 on the CPU reference), and so does `bf16`, which names that storage on the GPU (the
// CPU backend computes and stores in float32 throughout); `fp8` and `fp8_e4m3` (one format,
// two spellings, as vLLM has them) store e4m3 codes with per-vector scales.
#include "engine/cli/cache_options.h"

namespace m3::engine::cli {

void ApplyCacheOptions(const ArgParser& p, RunnerOptions& options) {
  options.fp8_index_keys = p.Choice("index-key-cache", {"bf16", "fp8"}, "bf16") == "fp8";
  const std::string kv = p.Choice("kv-cache-dtype", {"auto", "bf16", "fp8", "fp8_e4m3"}, "auto");
  options.fp8_kv_cache = kv == "fp8" || kv == "fp8_e4m3";
}

}  // namespace m3::engine::cli
