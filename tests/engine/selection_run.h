// A prompt through the single-sequence model with its MSA selections captured, then greedy
// decoding: what the FP8 index-key tests compare between two runner options (CPU and GPU).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/model.h"
#include "engine/step/model_runner.h"
#include "shared/safetensors.h"

namespace m3::test {

struct SelectionRun {
  std::vector<int64_t> tokens;  // greedy, ignore_eos
  NamedTensors selections;      // the prompt step's block_indices.layerN
};

SelectionRun RunCapturingSelections(const std::string& model_dir,
                                    const engine::RunnerOptions& options,
                                    const engine::ModelInputs& inputs, int64_t new_tokens);

// (entries compared, entries differing) over every captured selection; both runs must hold the
// same layers and shapes.
std::pair<int64_t, int64_t> CompareSelections(const SelectionRun& a, const SelectionRun& b);

}  // namespace m3::test
