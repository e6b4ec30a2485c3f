// Generate: the prefill / decode loop.
#include "engine/generate.h"

#include <algorithm>

namespace m3::engine {

std::vector<int64_t> Generate(const Model& model, const ModelInputs& inputs,
                              const GenerateOptions& options) {
  std::vector<int64_t> out;
  if (options.max_new_tokens <= 0) return out;
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
