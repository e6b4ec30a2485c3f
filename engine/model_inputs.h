// Reads a model-inputs safetensors file (the offline runner's input format): input_ids
// (integer [T]), optional pixel_values (float [N, patch_dim]) + image_grid_thw (integer [n, 3])
// and pixel_values_videos + video_grid_thw. Checks presence, dtypes and ranks; semantic checks
// (grids vs rows, placeholders) belong to the model.
#pragma once

#include <string>

#include "engine/model.h"
#include "shared/safetensors.h"

namespace m3::engine {

ModelInputs ReadModelInputs(const std::string& path);
ModelInputs ModelInputsFromFile(const SafetensorsFile& file);

}  // namespace m3::engine
