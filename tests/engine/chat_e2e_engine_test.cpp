// The chat-e2e model directory (bf16 weights, exactly as transformers 5.17 saves it) in the
// engine: it loads, and the text conversation's prompt ids give the reference's greedy
// completion. (The image conversations need the gateway's preprocessing: tests/e2e.)
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "engine/model_registry.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

TEST_CASE("chat-e2e: the bf16 model directory loads and reproduces the text completion") {
  auto model = engine::LoadModel(DataPath("chat-e2e/model"));
  REQUIRE(model != nullptr);
  // generation_config.json's eos (2) is where generation stops.
  CHECK(model->eos_token_ids() == std::vector<int64_t>{2});
  auto cases = nlohmann::json::parse(ReadFile(DataPath("chat-e2e/chat_cases.json")));
  int checked = 0;
  for (const auto& c : cases) {
    if (c["name"] != "text") continue;
    engine::ModelInputs in;
    for (const auto& id : c["prompt_ids"]) in.input_ids.push_back(id.get<int64_t>());
    std::vector<int64_t> want;
    for (const auto& id : c["completion_ids"]) want.push_back(id.get<int64_t>());
    engine::GenerateOptions opt;
    opt.max_new_tokens = static_cast<int64_t>(want.size());
    CHECK(engine::Generate(*model, in, opt) == want);
    ++checked;
  }
  CHECK(checked == 1);
}

}  // namespace
}  // namespace m3::test
