// The parity checks of a tensor- / expert-parallel runner against the single-rank runner on
// the same device kind, shared by the CPU test (parallel_test) and the 2-GPU test
// (cuda_parallel_test): through LoadModelRunner (one prompt with its media in one step, every
// row's logits, then greedy decodes) and through EngineCore (prompts alone on one rank, then
// batched twice on the parallel runner with a pool that holds only the longest: chunked
// prefill, preemption, prefix-cache hits).
#pragma once

#include <string>
#include <vector>

#include "engine/model.h"

namespace m3::test {

struct Parallel {
  int tp = 1, ep = 1;
};

struct ParityTolerance {
  double logits_rel_l2 = 1e-5;  // per logits row
  double logprob_abs = 1e-4;    // chosen tokens' logprobs through the engine
};

// `set` a directory under tests/data holding model/; `device` "cpu" or "cuda".
void CheckRunnerParity(const std::string& set, const std::string& device,
                       const engine::ModelInputs& prompt, Parallel p, const ParityTolerance& tol);
void CheckEngineParity(const std::string& set, const std::string& device,
                       const std::vector<engine::ModelInputs>& prompts, Parallel p,
                       const ParityTolerance& tol);

}  // namespace m3::test
