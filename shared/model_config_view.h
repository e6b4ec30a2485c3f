// ModelConfigView: the few config.json fields a server in front of the model reads (the
// gateway): the vocabulary, context length and special token ids it checks an engine's
// ModelInfo against and stops generation at, and the vision patch geometry its preprocessing
// must produce, with generation_config.json's defaults. The model's own parser, with every
// field and its validation, lives with the model (engine/minimax_m3/m3_config.h); this view
// reads the same keys with the same fallbacks and checks only what it returns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/generation_config.h"

namespace m3 {

struct ModelConfigView {
  struct Text {
    int64_t vocab_size = 0;
    int64_t max_position_embeddings = 0;  // 0: the config sets none
    int64_t bos_token_id = -1;
    std::vector<int64_t> eos_token_ids;  // config.json's
  };
  struct Vision {
    int64_t patch_size = 14;
    int64_t temporal_patch_size = 2;
    int64_t spatial_merge_size = 2;
  };
  std::string model_type;
  Text text;
  Vision vision;
  int64_t image_token_id = -1;
  int64_t video_token_id = -1;
  GenerationConfig generation;  // generation_config.json, when the directory has one

  // The ids generation stops at: generation_config.json's when it names any, else config.json's.
  const std::vector<int64_t>& eos_token_ids() const {
    return generation.eos_token_ids.empty() ? text.eos_token_ids : generation.eos_token_ids;
  }
};

// Parses config.json text; `source` names the file in error messages. Throws kInvalidArgument
// for a file without text_config / vision_config or with a field of the wrong type.
ModelConfigView ParseModelConfigView(const std::string& json_text, const std::string& source);
// Reads DIR/config.json and, when present, DIR/generation_config.json.
ModelConfigView LoadModelConfigView(const std::string& model_dir);

}  // namespace m3
