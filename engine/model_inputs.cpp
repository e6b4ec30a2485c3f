// ModelInputsFromFile: tensor lookups with named errors.
#include "engine/model_inputs.h"

#include "shared/error.h"

namespace m3::engine {
namespace {

std::optional<VisionInput> ReadVision(const SafetensorsFile& f, const std::string& pixels_name,
                                      const std::string& grid_name) {
  auto pixels = f.Find(pixels_name);
  auto grid = f.Find(grid_name);
  if (!pixels && !grid) return std::nullopt;
  Require(pixels.has_value(), ErrorCode::kInvalidArgument,
          f.path() + ": '" + grid_name + "' given without '" + pixels_name + "'");
  Require(grid.has_value(), ErrorCode::kInvalidArgument,
          f.path() + ": '" + pixels_name + "' given without '" + grid_name + "'");
  Require(
      pixels->shape.size() == 2, ErrorCode::kInvalidArgument,
      "'" + pixels_name + "' must be 2-D [patches, patch_dim], got " + ShapeString(pixels->shape));
  Require(grid->shape.size() == 2 && grid->shape[1] == 3, ErrorCode::kInvalidArgument,
          "'" + grid_name + "' must be [n, 3], got " + ShapeString(grid->shape));
  VisionInput v;
  v.rows = pixels->shape[0];
  v.patch_dim = pixels->shape[1];
  v.pixels = ToFloat32(*pixels, pixels_name);
  std::vector<int64_t> g = ToInt64(*grid, grid_name);
  for (int64_t i = 0; i < grid->shape[0]; ++i)
    v.grids.push_back({g[i * 3], g[i * 3 + 1], g[i * 3 + 2]});
  return v;
}

}  // namespace

ModelInputs ModelInputsFromFile(const SafetensorsFile& f) {
  auto ids = f.Find("input_ids");
  Require(ids.has_value(), ErrorCode::kInvalidArgument, f.path() + " has no 'input_ids' tensor");
  Require(ids->shape.size() == 1 || (ids->shape.size() == 2 && ids->shape[0] == 1),
          ErrorCode::kInvalidArgument,
          "'input_ids' must be [T] (or [1, T]), got " + ShapeString(ids->shape));
  ModelInputs in;
  in.input_ids = ToInt64(*ids, "input_ids");
  in.images = ReadVision(f, "pixel_values", "image_grid_thw");
  in.videos = ReadVision(f, "pixel_values_videos", "video_grid_thw");
  return in;
}

ModelInputs ReadModelInputs(const std::string& path) {
  return ModelInputsFromFile(SafetensorsFile::Open(path));
}

}  // namespace m3::engine
