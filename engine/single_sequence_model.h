// SingleSequenceModel: the Model interface (model.h: one sequence, Prefill then Decode) as a
// small driver over a ModelRunner, for the offline `m3-engine logits / generate` and the golden
// tests. It validates the request's inputs (token ids, context length, placeholders against the
// grids, finite pixels), encodes each image / video segment, and runs the prompt as prefill
// chunks and then one decode step per token through ModelRunner::Execute, on pages of its own
// small pool. The serving runtime (engine/runtime) drives the same runner with many sequences.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/model.h"
#include "engine/step/model_runner.h"

namespace m3::engine {

struct SingleSequenceOptions {
  int64_t page_size = 0;      // 0: the MSA block size (16 for a model without MSA layers)
  int64_t prefill_chunk = 0;  // prompt rows per step; 0: the whole prompt in one step
  int64_t kv_pages = 0;       // 0: two sequences of the model's context, at most 4 GiB
};

std::unique_ptr<Model> MakeSingleSequenceModel(std::unique_ptr<ModelRunner> runner,
                                               const SingleSequenceOptions& options = {});

}  // namespace m3::engine
