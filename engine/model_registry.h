// Model loading by config.json model_type: LoadModelRunner builds the architecture's ModelRunner
// (engine/step/model_runner.h) on a backend; LoadModel wraps one in the single-sequence driver
// (single_sequence_model.h) for the offline runner and tests. Adding an architecture = one
// runner Load function in its own files + one line in the table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/single_sequence_model.h"
#include "engine/step/model_runner.h"

namespace m3::engine {

// Opens a model directory and builds the runner for its config.json model_type on the chosen
// backend (the architecture table lives in model_registry.cpp). Throws kUnsupported for an
// unknown model_type or device.
std::unique_ptr<ModelRunner> LoadModelRunner(const std::string& model_dir,
                                             const RunnerOptions& options = {});
std::unique_ptr<Model> LoadModel(const std::string& model_dir,
                                 const SingleSequenceOptions& options = {},
                                 const RunnerOptions& runner = {});
std::vector<std::string> SupportedArchitectures();

}  // namespace m3::engine
