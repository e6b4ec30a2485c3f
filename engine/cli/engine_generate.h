// `m3-engine generate` through the serving engine (EngineCore with one request) rather than the
// single-sequence driver: the path speculative decoding runs on. Sampling is the engine's
// (BatchSampler, CounterUniform(seed, n) per token), so a seeded run reproduces what `serve`
// draws for the same request.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/runtime/engine_core.h"
#include "engine/step/model_runner.h"

namespace m3::engine::cli {

struct EngineGenerateResult {
  std::vector<int32_t> tokens;
  EngineStats stats;  // the speculative counters among them
};

// The prompt and media of `inputs` (each image / video item its grid's rows of the patches) as
// an EngineRequest with id `id` (sampling left default); `merge`: the spatial merge size.
EngineRequest RequestFromInputs(const ModelInputs& inputs, const std::string& id, int64_t merge);

// Runs `inputs` as one request, its sampling resolved against the model's generation_config.json
// and eos ids; throws the request's error (its code) if it fails.
EngineGenerateResult EngineGenerate(const std::string& model_dir, const RunnerOptions& runner,
                                    const EngineConfig& config, const ModelInputs& inputs,
                                    const SamplingRequest& sampling);

}  // namespace m3::engine::cli
