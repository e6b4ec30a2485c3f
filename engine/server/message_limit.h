// MaxRequestBytes: the gRPC receive limit of an engine, sized from the largest request its
// model and validation can accept (longest prompt, every position an image or video patch
// group in F32), instead of a fixed 1 GiB that lets any client make the engine buffer that much.
#pragma once

#include <cstdint>

#include "engine/runtime/engine_core.h"

namespace m3::engine::server {

// The largest serialized GenerateRequest that could pass validation, in bytes, capped at what
// gRPC can take (INT32_MAX). `max_prompt_tokens`: EngineCore::max_prompt_tokens().
int64_t MaxRequestBytes(const RunnerInfo& info, int64_t max_prompt_tokens);

}  // namespace m3::engine::server
