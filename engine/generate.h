// Offline generation: prefill the prompt once, then decode one token at a time on the caches,
// sampling each next token; stops at max_new_tokens or an EOS token (unless ignore_eos).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model.h"
#include "kernels/cpu/sampling.h"

namespace m3::engine {

// The bound on new tokens for a model whose config names no context length.
constexpr int64_t kMaxNewTokensWithoutContext = int64_t{1} << 20;

struct GenerateOptions {
  int64_t max_new_tokens = 16;
  bool ignore_eos = false;
  kernels::cpu::SamplingParams sampling;
};

std::vector<int64_t> Generate(const Model& model, const ModelInputs& inputs,
                              const GenerateOptions& options);

}  // namespace m3::engine
