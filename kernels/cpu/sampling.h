// Next-token sampling: greedy (temperature 0) or temperature + top-k + top-p with a seeded
// generator, so a seeded run is reproducible on every platform (the generator and its mapping
// to [0, 1) are fixed here, not left to <random> distributions).
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;        // (0, 1]
  int64_t top_k = 0;         // 0: no limit
  uint64_t seed = 0;
};

// Index of the largest logit (the first one on ties), as torch.argmax.
int64_t ArgMax(const float* logits, int64_t vocab);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  int64_t Sample(const float* logits, int64_t vocab);
  // The next uniform double in [0, 1) (53 random bits).
  double NextUniform();

 private:
  SamplingParams params_;
  uint64_t state_;  // splitmix64
};

}  // namespace m3::kernels::cpu
