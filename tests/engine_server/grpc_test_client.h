// Client-side helpers for the server tests: running a Generate stream to its end, and
// GenerateRequests built from the golden model cases (tests/data/<set>/model_cases.safetensors).
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "engine.grpc.pb.h"
#include "shared/safetensors.h"

namespace m3::test {

namespace v1 = engine::v1;

struct StreamResult {
  grpc::Status status;
  std::vector<int32_t> tokens;
  std::vector<v1::TokenLogprob> logprobs;
  int messages = 0;
  v1::GenerateResponse last;  // the final message (finish reason, counts, seed)
};

StreamResult RunStream(v1::Engine::Stub& stub, const v1::GenerateRequest& request);

// input_ids and the case's images / videos (F32, or BF16 when `bf16`), greedy, ignore_eos,
// max_tokens = the golden's greedy length.
v1::GenerateRequest GoldenRequest(const SafetensorsFile& cases, const std::string& prefix,
                                  bool bf16 = false);
std::vector<int32_t> GoldenTokens(const SafetensorsFile& cases, const std::string& prefix);

v1::HealthResponse Health(v1::Engine::Stub& stub);
// Polls Health until kv_pages_used reaches 0 and nothing runs (true) or `timeout_ms` passes.
bool WaitPagesFree(v1::Engine::Stub& stub, int timeout_ms);

}  // namespace m3::test
