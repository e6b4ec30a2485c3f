// GenerationResponder: the API side of a GenerationSession. The session's events become the
// response through a ResponseFormatter (SSE events as tokens arrive, or one body at the end;
// OpenAI's or Anthropic's), and a GenerationError becomes an error in the formatter's API shape:
// an HTTP status and error body when nothing has been written yet, or the formatter's stream
// error events once the stream has started.
// Nothing is written before the engine's first response, so a request that fails early still
// gets a proper status line. While nothing has been written (a whole response, or a stream
// before its first event) the responder agrees to Restart on another engine: the formatter is
// made anew by `remake`, so the new attempt's tokens are the answer's from its first.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gateway/engine_client/generation_observer.h"
#include "gateway/openai/response_formatter.h"

namespace m3::api {

struct ResponseSink {
  // Streaming only: SSE text, in order. The first call means a 200 with an event stream.
  std::function<void(std::string events)> write;
  // Exactly once, last. Streaming: status 200 and an empty body after the final write, or an
  // error status and OpenAI error body when nothing was written. Non-streaming: the status and
  // the response or error body. 499 (nothing to send) after the session was cancelled.
  std::function<void(int http_status, std::string body)> finish;
};

// A new formatter for the same request, as the first one was before any token.
using FormatterFactory = std::function<std::unique_ptr<openai::ResponseFormatter>()>;

// `remake` (optional): without it a restart is possible only before the first token.
std::shared_ptr<engine_client::GenerationObserver> MakeGenerationResponder(
    std::unique_ptr<openai::ResponseFormatter> formatter, ResponseSink sink,
    FormatterFactory remake = {});

}  // namespace m3::api
