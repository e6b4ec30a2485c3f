// DemoPrompts: the ids below come from `m3-gateway prepare --model tests/data/demo-model/model`
// on one-message chat requests; the image question's twelve placeholders (id 6, between vision
// start 8 and end 9) become as many as the m3-tiny pictures' grids need.
#include "tests/cuda/demo_prompts.h"

#include <cstdint>

#include "tests/engine/golden_cases.h"

namespace m3::test {
namespace {

// "<bos>system ...<eos>\nuser\n" and "<eos>\nassistant\n<think>\n"-like frames of the template.
const std::vector<int64_t> kHead = {3,   1,   94,  100, 94, 324, 88, 210, 399, 382,
                                    268, 431, 438, 25,  2,  210, 1,  96,  411, 210};
const std::vector<int64_t> kTail = {2, 210, 1, 76, 84, 210, 4, 210};
constexpr int64_t kImage = 6, kVideo = 7, kVisionStart = 8, kVisionEnd = 9;

std::vector<int64_t> Frame(std::vector<int64_t> body) {
  std::vector<int64_t> ids = kHead;
  ids.insert(ids.end(), body.begin(), body.end());
  ids.insert(ids.end(), kTail.begin(), kTail.end());
  return ids;
}

void AddMedia(std::vector<int64_t>& body, int64_t token, int64_t count) {
  body.push_back(kVisionStart);
  body.insert(body.end(), count, token);
  body.push_back(kVisionEnd);
}

// "What colour is the object in the picture?"
const std::vector<int64_t> kColourQuestion = {343, 351, 270, 340, 394, 356, 340, 352, 42};

int64_t Tokens(const std::array<int64_t, 3>& g) {
  return g[0] * g[1] * g[2] / 4;  // spatial merge 2 x 2
}

}  // namespace

std::vector<DemoPrompt> DemoPrompts() {
  std::vector<DemoPrompt> out;
  out.push_back({"text: what shape is a ball", {}});
  out.back().inputs.input_ids = Frame({343, 285, 270, 268, 271, 76, 312, 42});
  out.push_back({"text: describe the image", {}});
  out.back().inputs.input_ids = Frame({372, 340, 434, 25});
  out.push_back({"text: what colour is the sky", {}});
  out.back().inputs.input_ids = Frame({343, 351, 270, 340, 272, 86, 100, 42});

  const GoldenSet& g = Golden("m3-tiny");
  for (const std::string prefix : {"image", "image2"}) {
    DemoPrompt p{prefix + ": what colour is the object", g.Inputs(prefix)};
    std::vector<int64_t> body;
    for (const auto& grid : p.inputs.images->grids) AddMedia(body, kImage, Tokens(grid));
    body.insert(body.end(), kColourQuestion.begin(), kColourQuestion.end());
    p.inputs.input_ids = Frame(body);
    out.push_back(std::move(p));
  }
  DemoPrompt v{"video: what colour is the object", g.Inputs("video")};
  std::vector<int64_t> body;
  for (const auto& grid : v.inputs.videos->grids) AddMedia(body, kVideo, Tokens(grid));
  body.insert(body.end(), kColourQuestion.begin(), kColourQuestion.end());
  v.inputs.input_ids = Frame(body);
  out.push_back(std::move(v));
  return out;
}

}  // namespace m3::test
