// Generate: the prefill / decode loop.
#include "engine/generate.h"

#include <algorithm>
#include <string>

#include "shared/error.h"

namespace m3::engine {

std::vector<int64_t> Generate(const Model& model, const ModelInputs& inputs,
                              const GenerateOptions& options) {
  std::vector<int64_t> out;
  if (options.max_new_tokens <= 0) return out;
  const int64_t prompt = static_cast<int64_t>(inputs.input_ids.size());
  const int64_t limit = model.max_context() > 0 ? model.max_context() : kMaxNewTokensWithoutContext;
  Require(options.max_new_tokens <= limit - prompt, ErrorCode::kInvalidArgument,
          "a prompt of " + std::to_string(prompt) + " tokens plus " +
              std::to_string(options.max_new_tokens) + " new tokens exceeds the context of " +
              std::to_string(limit) + " tokens");
  auto seq = model.NewSequence();
  CaptureOptions capture;
  capture.all_logits = false;
  PrefillResult prefill = model.Prefill(*seq, inputs, capture);
  kernels::cpu::Sampler sampler(options.sampling);
  const int64_t V = model.vocab_size();
  const std::vector<int64_t> eos = model.eos_token_ids();
  std::vector<float> logits = std::move(prefill.logits);
  for (;;) {
    int64_t token = sampler.Sample(logits.data(), V);
    out.push_back(token);
    bool stop = !options.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end();
    if (stop || static_cast<int64_t>(out.size()) >= options.max_new_tokens) break;
    logits = model.Decode(*seq, token);
  }
  return out;
}

}  // namespace m3::engine
