// WeightLoader::Load: shape check, then conversion with m3::ToFloat32.
#include "engine/weight_loader.h"

#include "shared/error.h"

namespace m3::engine {

std::vector<float> WeightLoader::Load(const std::string& name, const Shape& expected) const {
  auto view = store_.Find(name);
  Require(view.has_value(), ErrorCode::kNotFound,
          "weight '" + name + "' is missing from the checkpoint in " + store_.dir());
  Require(view->shape == expected, ErrorCode::kInvalidArgument,
          "weight '" + name + "' has shape " + ShapeString(view->shape) + ", expected " +
              ShapeString(expected) + " from config.json");
  return ToFloat32(*view, name);
}

}  // namespace m3::engine
