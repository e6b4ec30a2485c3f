// GenerationObserver: what a GenerationSession reports of one generation, in order: the new
// tokens of each engine response (from the start again after a Restart that returned true),
// then exactly one end: the finish (the reason and the token
// usage), a failure (a GenerationError: what went wrong, in the engine client's terms; how a
// client is told is the API layer's business), or the cancellation the caller asked for.
// Calls are never concurrent and come on gRPC threads, or on the thread that started the
// session when no engine can take the request.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "gateway/openai/generation_output.h"
#include "gateway/text/output_parser.h"

namespace m3::engine_client {

enum class GenerationErrorKind {
  kInvalidRequest,  // the engine refused the request as malformed (INVALID_ARGUMENT, OUT_OF_RANGE)
  kBusy,            // the engine is out of capacity (RESOURCE_EXHAUSTED)
  kNoEngine,        // no engine can take the request (none healthy, shutting down, UNAVAILABLE)
  kTimeout,         // the engine ran out of time (DEADLINE_EXCEEDED)
  kShuttingDown,    // the gateway's shutdown grace period ended before the generation did
  kEngineFailure,   // anything else: a broken stream, a response that cannot be read
};

struct GenerationError {
  GenerationErrorKind kind = GenerationErrorKind::kEngineFailure;
  std::string message;
};

class GenerationObserver {
 public:
  virtual ~GenerationObserver() = default;

  // The tokens of one engine response (and, when asked for, one logprob entry per token).
  // Returns true when the output is complete on its own (it ended on a stop string): the
  // engine request is then cancelled and OnFinish(kStop) follows with the usage so far. Throws
  // m3::Error when the tokens cannot be decoded (an id the tokenizer lacks): the generation
  // then fails as the engine's (kEngineFailure).
  virtual bool OnTokens(std::span<const int32_t> ids,
                        std::span<const openai::TokenLogprob> logprobs) = 0;
  virtual void OnFinish(text::FinishReason reason, const openai::Usage& usage) = 0;
  virtual void OnError(const GenerationError& error) = 0;
  // After GenerationSession::Cancel: the client is gone, nothing is to be sent.
  virtual void OnCancelled() = 0;
  // The engine died before the end: may the generation start over on another engine? True
  // when nothing has reached the client yet, and then everything OnTokens was given is
  // forgotten (the next tokens are the new attempt's from its first). False (the default)
  // once output has been sent: the failure then ends the generation with OnError.
  virtual bool Restart() { return false; }
};

}  // namespace m3::engine_client
