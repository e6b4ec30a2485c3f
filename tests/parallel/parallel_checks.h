// The parity checks of a tensor- / expert-parallel runner against the single-rank runner on
// the same device kind, shared by the CPU test (parallel_test) and the 2-GPU test
// (cuda_parallel_test): through LoadModelRunner (one prompt with its media in one step, every
// row's logits, then greedy decodes) and through EngineCore (prompts alone on one rank, then
// batched twice on the parallel runner with a pool that holds only the longest: chunked
// prefill, preemption, prefix-cache hits).
#pragma once

#include <cstdint>
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
  // bf16 devices: two bf16 runs that sum in different orders may flip discrete choices among
  // near-tied scores (MSA blocks, experts; on random weights many are near-tied), after which
  // they need not agree with each other. Then the parallel runner is held to the float32 CPU
  // runner: every layer's hidden states and the prompt's logits within reference_factor x the
  // single rank's own distance + logits_rel_l2, the first decoder layer's output (before any
  // choice) within 2x that distance of the single rank.
  bool against_reference = false;
  double reference_factor = 3;
  // Greedy tokens equal the single rank's (runner and engine); false for random-weight sets
  // on bf16 devices, whose engine check then runs every request to its length unchecked.
  bool same_tokens = true;
};

// What an engine check exercised (whether preemption and prefix hits happen in one run
// depends on timing, so callers check them summed over several runs).
struct EngineExercise {
  int64_t preemptions = 0;
  int64_t prefix_hit_tokens = 0;
  EngineExercise& operator+=(const EngineExercise& o) {
    preemptions += o.preemptions;
    prefix_hit_tokens += o.prefix_hit_tokens;
    return *this;
  }
};

// `set` a directory under tests/data holding model/ (or, for CheckRunnerParity, an absolute
// model directory); `device` "cpu" or "cuda". last_rows: compare only the prompt's last rows'
// logits (0: every row; long prompts at real vocabularies).
void CheckRunnerParity(const std::string& set, const std::string& device,
                       const engine::ModelInputs& prompt, Parallel p, const ParityTolerance& tol,
                       int64_t last_rows = 0);
// Long prompts on random checkpoints at the real widths, where a float32 reference is too
// slow: the parallel runner's prompt step against the single rank's layer by layer (printed;
// later layers part wherever bf16 rounding flips a near-tied MSA or expert choice), the first
// decoder layer's output (before any such choice) within first_layer_rel_l2.
void CheckLayerwise(const std::string& set, const std::string& device,
                    const engine::ModelInputs& prompt, Parallel p, int64_t last_rows,
                    double first_layer_rel_l2);
// GPU ranks: the runner with the peer all-reduce (--all-reduce custom) against the same runner
// with NCCL alone (--all-reduce nccl), the prompt (its last last_rows rows; 0: all) and
// `decodes` greedy decode steps (replayed CUDA graphs): every logits row up to the first
// differing greedy choice within logits_rel_l2 of NCCL's (bf16 rounding: the sums are rounded
// in another order past 2 ranks), and with same_tokens the greedy tokens equal. Prints how many
// rows are bit-identical (at 2 ranks, all: the two sum the same way).
void CheckAllReduceParity(const std::string& set, const engine::ModelInputs& prompt, Parallel p,
                          int decodes, bool same_tokens, double logits_rel_l2,
                          int64_t last_rows = 0);
EngineExercise CheckEngineParity(const std::string& set, const std::string& device,
                                 const std::vector<engine::ModelInputs>& prompts, Parallel p,
                                 const ParityTolerance& tol);

}  // namespace m3::test
