// EngineRequest: one generation request as the engine core takes it (front-end independent:
// the gRPC server and in-process callers build it), and RequestOutput, what the core streams
// back for it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/step/batch_sampler.h"
#include "engine/step/sampling_params.h"
#include "grammar/grammar.h"
#include "shared/error.h"

namespace m3::engine {

// The grid_thw values a request may carry (ValidateRequest refuses others): up to 2^20, so
// products of three stay below 2^60.
inline constexpr int64_t kMaxGridValue = int64_t{1} << 20;
inline constexpr bool GridValueInBounds(int64_t g) {
  return g > 0 && g <= kMaxGridValue;
}

// One image or video, preprocessed: flat patches [rows, patch_dim] in the gateway's order.
struct MediaItem {
  bool video = false;
  std::array<int64_t, 3> grid_thw{};
  int64_t placeholder_tokens = 0;  // as the client declared it; checked against the grid
  std::vector<float> patches;
  int64_t patch_dim = 0;
};

struct EngineRequest {
  std::string id;
  std::vector<int32_t> prompt;
  std::vector<MediaItem> media;  // images fill image placeholders in order, videos video ones
  SamplingParams sampling;
  // Structured output: every generated token must keep the output inside this grammar (the
  // sampler draws from its next-token mask; eos only where it can end). Null: unconstrained.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  int32_t grammar_start_after = -1;  // >= 0: the grammar applies after this token is generated
};

enum class FinishReason { kNone, kStop, kLength, kAbort, kError };

struct RequestOutput {
  std::vector<int32_t> tokens;         // new since the previous output
  std::vector<SampledToken> logprobs;  // per new token, when asked
  FinishReason finish = FinishReason::kNone;
  std::string error;  // kError: why
  ErrorCode error_code = ErrorCode::kInternal;
  int64_t prompt_tokens = 0;  // set on the final output
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  uint64_t seed = 0;
};

// Called on the engine thread; must not block (queue and return).
using OutputSink = std::function<void(RequestOutput&&)>;

}  // namespace m3::engine
