// Model loading by config.json model_type: LoadModelRunner (runtime/model_runner.h) builds the
// architecture's ModelRunner on a backend; LoadModel wraps one in the single-sequence driver
// (single_sequence_model.h) for the offline runner and tests. Adding an architecture = one
// runner Load function in its own files + one line in the table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/runtime/model_runner.h"
#include "engine/single_sequence_model.h"

namespace m3::engine {

std::unique_ptr<Model> LoadModel(const std::string& model_dir,
                                 const SingleSequenceOptions& options = {},
                                 const RunnerOptions& runner = {});
std::vector<std::string> SupportedArchitectures();

}  // namespace m3::engine
