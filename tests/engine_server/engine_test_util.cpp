// RandomToyRequest: prompts of random text with random images and videos placed in them.
#include "tests/engine_server/engine_test_util.h"

#include "tests/runtime/toy_runner.h"

namespace m3::test {

engine::EngineRequest RandomToyRequest(std::mt19937_64& rng, const std::string& id,
                                       const std::vector<int32_t>& shared_prefix,
                                       const std::vector<engine::MediaItem>& shared_media) {
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  engine::EngineRequest r;
  r.id = id;
  r.prompt = shared_prefix;
  r.media = shared_media;
  auto text = [&](int64_t n) {
    for (int64_t i = 0; i < n; ++i) r.prompt.push_back(static_cast<int32_t>(uni(0, 59)));
  };
  text(uni(shared_prefix.empty() ? 1 : 0, 40));
  const int64_t items = uni(0, 2);
  for (int64_t k = 0; k < items; ++k) {
    engine::MediaItem m;
    m.video = uni(0, 3) == 0;
    m.patch_dim = ToyRunner::kPatchDim;
    m.grid_thw = {m.video ? uni(1, 3) : 1, 2 * uni(1, 3), 2 * uni(1, 3)};
    const int64_t rows = m.grid_thw[0] * m.grid_thw[1] * m.grid_thw[2];
    m.placeholder_tokens = rows / 4;
    for (int64_t i = 0; i < rows * m.patch_dim; ++i)
      m.patches.push_back(std::uniform_real_distribution<float>(-1, 1)(rng));
    const int32_t ph = m.video ? ToyRunner::kVideoToken : ToyRunner::kImageToken;
    const int64_t per_group = m.grid_thw[1] * m.grid_thw[2] / 4;
    for (int64_t t = 0; t < m.grid_thw[0]; ++t) {
      if (m.video) r.prompt.push_back(static_cast<int32_t>(uni(0, 59)));  // a "timestamp"
      for (int64_t i = 0; i < per_group; ++i) r.prompt.push_back(ph);
    }
    text(uni(0, 6));
    r.media.push_back(std::move(m));
  }
  r.sampling.max_tokens = uni(1, 12);
  r.sampling.temperature = uni(0, 1) ? 0.0 : 1.0;
  r.sampling.seed = static_cast<uint64_t>(uni(0, 1000000));
  r.sampling.eos_token_ids = {ToyRunner::kEos};
  r.sampling.ignore_eos = uni(0, 2) != 0;
  return r;
}

}  // namespace m3::test
