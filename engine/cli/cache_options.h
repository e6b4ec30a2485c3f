// The cache storage options every m3-engine command takes, parsed into RunnerOptions:
// --index-key-cache bf16|fp8 (MSA index keys) and --kv-cache-dtype auto|bf16|fp8|fp8_e4m3 (the
// decoder's K/V pages; vLLM's spellings). Any other value is a usage error naming the choices.
#pragma once

#include "engine/cli/arg_parser.h"
#include "engine/step/model_runner.h"

namespace m3::engine::cli {

// Sets options.fp8_index_keys and options.fp8_kv_cache from the parsed options (the command
// declares both: "index-key-cache", "kv-cache-dtype").
void ApplyCacheOptions(const ArgParser& p, RunnerOptions& options);

}  // namespace m3::engine::cli
