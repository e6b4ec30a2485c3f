// ValidateRequest: what the engine checks before it queues a request, so that a bad request is
// refused with a message naming the problem instead of failing a step that other requests
// share: token ids in the vocabulary, the prompt within the context and the KV pool, media
// patches matching their grid and the model's patch size, finite pixel values. Placeholder
// counts against grids are checked when the Sequence places the media.
#pragma once

#include <cstdint>

#include "engine/runtime/engine_request.h"
#include "engine/step/model_runner.h"

namespace m3::engine {

// Throws kInvalidArgument.
void ValidateRequest(const EngineRequest& request, const RunnerInfo& info,
                     int64_t max_prompt_tokens);

}  // namespace m3::engine
