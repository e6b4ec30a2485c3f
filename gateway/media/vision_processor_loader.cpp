// LoadVisionProcessor: picks and configures the vision processor for a model directory. Only
// the MiniMax-M3 family exists today; a second family would be chosen here from config.json.
#include <memory>
#include <string>

#include "gateway/media/m3_vision_processor.h"
#include "gateway/media/vision_processor.h"

namespace m3::media {

std::shared_ptr<const VisionProcessor> LoadVisionProcessor(const std::string& model_dir) {
  return std::make_shared<const M3VisionProcessor>(LoadM3VisionConfig(model_dir));
}

}  // namespace m3::media
