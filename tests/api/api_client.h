// A small blocking HTTP/1.1 client for the API tests, over plain sockets to 127.0.0.1: one
// request per connection (Connection: close), the body de-chunked, and for streams each piece
// handed to a callback as it arrives (so a test can act mid-stream and time what follows).
// Every wait is bounded by the timeout. Also the SSE reader for chat and text completions.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace m3::test {

struct ApiReply {
  int status = 0;                              // 0: no complete answer (see error)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
  std::string error;                           // why the exchange failed, if it did
  bool complete = false;                       // the body ended as its framing said
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// `on_data` (optional) gets every de-chunked body piece as it arrives.
ApiReply ApiCall(uint16_t port, const std::string& method, const std::string& target,
                 const std::string& body = "", const Headers& headers = {}, int timeout_ms = 60000,
                 const std::function<void(std::string_view)>& on_data = nullptr);
// POST with Content-Type: application/json.
ApiReply PostJson(uint16_t port, const std::string& target, const nlohmann::json& body,
                  const Headers& headers = {}, int timeout_ms = 60000);

// A streamed POST whose server is stopped mid-stream: `terminate` (e.g. the gateway's SIGTERM,
// returning its exit status) runs on another thread once the stream's text shows `marker` (its
// first generated token), while the client reads on to the end of what the server sends.
struct StoppedStream {
  ApiReply reply;
  bool started = false;  // the marker came and terminate ran
  int exit_status = -2;  // terminate's result
};
StoppedStream StreamThenStop(uint16_t port, const std::string& target, const std::string& body,
                             std::string_view marker, const std::function<int()>& terminate);

// What a chat or text completion stream said: content and reasoning concatenated over the
// chunks, the last usage and finish_reason, error events, and whether [DONE] ended it.
struct StreamSummary {
  std::string content, reasoning, text;  // text: /v1/completions' choices[].text
  nlohmann::json usage;
  std::string finish_reason;
  std::vector<nlohmann::json> errors;
  int chunks = 0;
  bool done = false;
  bool well_formed = true;  // every event was "data: <json>" or [DONE]
};
StreamSummary ReadSse(const std::string& sse);

}  // namespace m3::test
