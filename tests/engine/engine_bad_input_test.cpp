// Bad input to the engine is a clear error before any work: non-finite pixels, prompts or
// generation lengths beyond the model's context, the CLI's unbounded --max-new-tokens.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "engine/generate.h"
#include "engine/model_registry.h"
#include "tests/engine/golden_cases.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

TEST_CASE("generation stops at the context length, never past it") {
  auto model = engine::LoadModel(DataPath("m3-tiny/model"));
  engine::ModelInputs in;
  in.input_ids.assign(4090, 7);  // max_position_embeddings is 4096
  engine::GenerateOptions opt;
  opt.ignore_eos = true;
  opt.max_new_tokens = 7;
  CHECK_THROWS_WITH(engine::Generate(*model, in, opt),
                    doctest::Contains("exceeds the context of 4096 tokens"));
  in.input_ids.assign(4097, 7);
  auto seq = model->NewSequence();
  CHECK_THROWS_WITH(model->Prefill(*seq, in, {}),
                    doctest::Contains("beyond the model's context of 4096"));
}

TEST_CASE("NaN or infinite pixels are rejected by name") {
  const GoldenSet& g = Golden("m3-tiny");
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    engine::ModelInputs in = g.Inputs("image");
    in.images->pixels[5 * in.images->patch_dim + 3] = bad;
    auto seq = g.model->NewSequence();
    CHECK_THROWS_WITH(g.model->Prefill(*seq, in, {}),
                      doctest::Contains("image pixel_values[5, 3] is not a finite number"));
  }
}

TEST_CASE("m3-engine generate: --max-new-tokens beyond the context is refused") {
  auto r = RunProcess({BinPath("m3-engine"), "generate", "--model", DataPath("m3-tiny/model"),
                       "--inputs", DataPath("demo/image_prompt.safetensors"), "--ignore-eos",
                       "--max-new-tokens", "100000000"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("exceeds the context of 4096 tokens") != std::string::npos);
}

}  // namespace
}  // namespace m3::test
