// Test helpers for the golden model cases (tests/data/<set>/model_cases.safetensors): the
// model of a set loaded once per process, case inputs as ModelInputs, tensors as vectors.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/runtime/engine_request.h"
#include "shared/safetensors.h"

namespace m3::test {

struct GoldenSet {
  std::string name;  // "m3-tiny", "m3-alt"
  SafetensorsFile cases;
  std::unique_ptr<engine::Model> model;

  std::vector<float> Floats(const std::string& key) const;
  std::vector<int64_t> Ints(const std::string& key) const;
  Shape ShapeOf(const std::string& key) const;
  // input_ids, pixel_values(+grid) and pixel_values_videos(+grid) of case `prefix`.
  engine::ModelInputs Inputs(const std::string& prefix) const;
  // The same, as a runner input file's tensors.
  NamedTensors InputTensors(const std::string& prefix) const;
};

const GoldenSet& Golden(const std::string& name);

// A case's images then videos as an engine request's media items (patch rows per grid).
std::vector<engine::MediaItem> MediaItems(const engine::ModelInputs& inputs);

// Largest relative L2 errors seen per "set/case", printed at exit (the parity figures).
void RecordParity(const std::string& key, double rel_l2);

}  // namespace m3::test
