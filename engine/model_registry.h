// LoadModel: opens a checkpoint directory and builds the Model for its config.json model_type.
// Adding an architecture = one Load function in its own files + one line in the table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"

namespace m3::engine {

std::unique_ptr<Model> LoadModel(const std::string& model_dir);
std::vector<std::string> SupportedArchitectures();

}  // namespace m3::engine
