// Conversions between the wire messages of proto/engine.proto and the engine core's types:
// a GenerateRequest becomes an EngineRequest (pixels decoded from F32 or BF16, sampling
// resolved over the model's defaults), a RequestOutput is appended to a GenerateResponse.
// Malformed input throws m3::Error(kInvalidArgument) naming the field.
#pragma once

#include "engine.pb.h"
#include "engine/runtime/engine_core.h"
#include "engine/server/structured_output.h"

namespace m3::engine::server {

// `structured`: compiles the request's structured output (null: such requests are refused).
EngineRequest FromProto(const v1::GenerateRequest& request, EngineCore& core,
                        const StructuredOutputCompiler* structured = nullptr);

// Appends `out` (tokens, logprobs, finish and counts) to `msg`, so outputs that queue up while
// a write is in flight go out as one message.
void AppendOutput(const RequestOutput& out, v1::GenerateResponse* msg);

}  // namespace m3::engine::server
