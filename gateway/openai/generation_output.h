// What the response builders take from a generation, independent of how it was produced
// (engine over gRPC, tests): the response's identity, per-token logprobs, and token usage.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace m3::openai {

struct ResponseIdentity {
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // the most likely alternatives, best first
};

struct Usage {
  int64_t prompt_tokens = 0;  // vision placeholder tokens included
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;
};

}  // namespace m3::openai
