// LoadVisionProcessor: picks and configures the vision processor for a model directory. Only
// the MiniMax-M3 family exists today; a second family would be chosen here from config.json.
// The directory is checked first, so a wrong --model fails at start instead of serving with
// defaults, and the processor's patch layout is checked against the vision tower's.
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>

#include "gateway/media/m3_vision_processor.h"
#include "gateway/media/vision_processor.h"
#include "shared/error.h"
#include "shared/model_config_view.h"

namespace m3::media {
namespace {

constexpr const char* kModelFiles[] = {"config.json", "processor_config.json",
                                       "preprocessor_config.json",
                                       "video_preprocessor_config.json"};

void CheckModelDir(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(model_dir, ec);
  Require(fs::exists(st), ErrorCode::kNotFound,
          "model directory '" + model_dir + "' does not exist");
  Require(fs::is_directory(st), ErrorCode::kInvalidArgument,
          "model directory '" + model_dir + "' is not a directory");
  bool any = false;
  for (const char* name : kModelFiles) any = any || fs::exists(fs::path(model_dir) / name, ec);
  Require(any, ErrorCode::kNotFound,
          "'" + model_dir +
              "' is not a model directory: it has none of config.json, processor_config.json, "
              "preprocessor_config.json, video_preprocessor_config.json");
}

// The processor cuts the patches the vision tower embeds and merges: both files must agree.
void CheckAgainstModel(const M3VisionConfig& p, const std::string& model_dir) {
  if (!std::filesystem::exists(std::filesystem::path(model_dir) / "config.json")) return;
  const ModelConfigView::Vision v = LoadModelConfigView(model_dir).vision;
  for (auto [name, processor, model] :
       {std::tuple{"patch_size", p.patch_size, v.patch_size},
        std::tuple{"temporal_patch_size", p.temporal_patch_size, v.temporal_patch_size},
        std::tuple{"merge_size", p.merge_size, v.spatial_merge_size}}) {
    Require(processor == model, ErrorCode::kInvalidArgument,
            model_dir + ": the processor's " + name + " (" + std::to_string(processor) +
                ") differs from config.json's vision_config (" + std::to_string(model) +
                "): the vision tower could not use its patches");
  }
}

}  // namespace

std::shared_ptr<const VisionProcessor> LoadVisionProcessor(const std::string& model_dir) {
  if (model_dir.empty()) return std::make_shared<const M3VisionProcessor>(M3VisionConfig{});
  CheckModelDir(model_dir);
  const M3VisionConfig config = LoadM3VisionConfig(model_dir);
  CheckAgainstModel(config, model_dir);
  return std::make_shared<const M3VisionProcessor>(config);
}

}  // namespace m3::media
