// Prompts for the trained demo model (tests/data/demo-model) in the GPU tests: chat-template
// token ids made by `m3-gateway prepare` from the model's own template and tokenizer (text
// questions, and the demo's image question with its placeholder run resized), with the pictures
// and the video of the m3-tiny golden cases (same patch geometry) as media, so no media
// preprocessing is needed where the GPU tests run.
#pragma once

#include <string>
#include <vector>

#include "engine/model.h"

namespace m3::test {

struct DemoPrompt {
  std::string name;
  engine::ModelInputs inputs;
};

std::vector<DemoPrompt> DemoPrompts();

}  // namespace m3::test
