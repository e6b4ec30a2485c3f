// The properties the network fuzzers check on one input, shared by the deterministic fuzz test
// (tests/net/net_fuzz_test.cpp, run in CI) and the libFuzzer harness
// (tests/net/net_libfuzzer.cpp, for long coverage-guided runs under ASan/UBSan, which also
// bounds each input's time per byte). Each returns
// an empty string when the input was handled correctly, else what went wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace m3::net::fuzz {

// HttpRequestParser: fed whole and in pieces split at positions drawn from `split_seed`, it
// must reach the same outcome; refusals carry a 4xx/5xx status from the documented set and
// a message; accepted requests respect the limits; nothing throws.
std::string CheckHttpRequest(std::string_view wire, uint64_t split_seed);

// ParseRequestJson / ParsePreprocessRequest: success with at least one item, or a ParamError
// with kInvalidArgument (kTooLarge for a structure over the parser's limits); nothing else
// escapes.
std::string CheckRequestJson(std::string_view body);

// The API request readers on a body: ParseRequestBody, then (by `which` % 4) ParseChatRequest,
// ParseCompletionRequest or ParseMessagesRequest (create / count_tokens). Only RequestError
// with a 4xx status and a message escapes. Also differential: the bounded parser accepts
// exactly what nlohmann::json::parse accepts and builds the same value (but for number
// literals over its length bound, which it refuses).
std::string CheckApiRequest(std::string_view body, uint8_t which);

}  // namespace m3::net::fuzz
