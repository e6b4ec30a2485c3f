// EngineGenerate: model inputs -> one EngineRequest, run to its end on an EngineCore.
#include "engine/cli/engine_generate.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/model_registry.h"
#include "shared/error.h"
#include "shared/generation_config.h"

namespace m3::engine::cli {
namespace {

// Each image / video of the inputs as a MediaItem (its grid's rows of the flat patches).
void AppendMedia(const std::optional<VisionInput>& v, bool video, int64_t merge,
                 std::vector<MediaItem>& out) {
  if (!v) return;
  int64_t row = 0;
  for (const auto& g : v->grids) {
    MediaItem m;
    m.video = video;
    m.grid_thw = g;
    m.patch_dim = v->patch_dim;
    const int64_t rows = g[0] * g[1] * g[2];
    Require(rows > 0 && row + rows <= v->rows, ErrorCode::kInvalidArgument,
            std::string(video ? "video" : "image") + " grids cover more patch rows than given");
    m.placeholder_tokens = rows / (merge * merge);
    m.patches.assign(v->pixels.begin() + row * v->patch_dim,
                     v->pixels.begin() + (row + rows) * v->patch_dim);
    row += rows;
    out.push_back(std::move(m));
  }
}

}  // namespace

EngineRequest RequestFromInputs(const ModelInputs& inputs, const std::string& id, int64_t merge) {
  EngineRequest req;
  req.id = id;
  req.prompt.assign(inputs.input_ids.begin(), inputs.input_ids.end());
  merge = std::max<int64_t>(merge, 1);
  AppendMedia(inputs.images, false, merge, req.media);
  AppendMedia(inputs.videos, true, merge, req.media);
  return req;
}

EngineGenerateResult EngineGenerate(const std::string& model_dir, const RunnerOptions& runner,
                                    const EngineConfig& config, const ModelInputs& inputs,
                                    const SamplingRequest& sampling) {
  EngineCore core(LoadModelRunner(model_dir, runner), config);
  EngineRequest req = RequestFromInputs(inputs, "generate", core.info().spatial_merge_size);
  req.sampling =
      ResolveSamplingParams(sampling, LoadGenerationConfig(model_dir), core.info().eos_token_ids,
                            core.info().vocab_size, core.FreshSeed());
  std::mutex mu;
  std::condition_variable cv;
  EngineGenerateResult result;
  bool done = false;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  ErrorCode code = ErrorCode::kInternal;
  core.Submit(std::move(req), [&](RequestOutput&& o) {
    std::lock_guard<std::mutex> lock(mu);
    result.tokens.insert(result.tokens.end(), o.tokens.begin(), o.tokens.end());
    if (o.finish != FinishReason::kNone) {
      reason = o.finish;
      error = o.error;
      code = o.error_code;
      done = true;
      cv.notify_all();
    }
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  Require(reason != FinishReason::kError, code, error);
  // The engine publishes its counters after the loop iteration that finished the request.
  while (!core.Idle() || core.Stats().running > 0) std::this_thread::yield();
  result.stats = core.Stats();
  return result;
}

}  // namespace m3::engine::cli
