// ChoiceFanIn: the n choices of one OpenAI request (n > 1) answered as one response. Each
// choice is its own generation session with its own response formatter (as for n = 1); the
// fan-in rewrites what the formatters write so the client sees one answer: streamed, every
// chunk's choices carry the choice's "index", and the per-choice usage chunks and [DONE] are
// replaced by one usage chunk (prompt tokens once, completion tokens summed) and one [DONE]
// when the last choice ends; whole, the choices are gathered into the first body in index order
// with the summed usage. The first choice that fails fails the response (the others are
// cancelled): an error status when nothing was written, the formatter's stream error events
// otherwise.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gateway/api/generation_responder.h"
#include "gateway/engine_client/generation_observer.h"
#include "gateway/openai/generation_output.h"

namespace m3::api {

class ChoiceFanIn : public std::enable_shared_from_this<ChoiceFanIn> {
 public:
  // `cancel_all`: cancels every choice's session (called once, when one choice fails).
  ChoiceFanIn(int n, bool streaming, ResponseSink sink, std::function<void()> cancel_all);

  // The observer of choice `index`; `make` builds its formatter (again on a restart).
  std::shared_ptr<engine_client::GenerationObserver> Observer(int index, FormatterFactory make);

  // Called with the index of a choice the first time it reports tokens or ends.
  void OnFirstProgress(std::function<void(int index)> hook);

  // --- for the per-choice observers ---
  bool started_writing() const;
  bool finished() const;
  void Write(int index, std::vector<std::string> events);
  void Progress(int index);
  void Done(int index, const openai::Usage& usage, std::string body);
  void Fail(int index, int http_status, const std::string& body,
            const std::vector<std::string>& stream_events);
  void Cancelled();

 private:
  // One SSE event of choice `index` as the merged stream has it (empty: dropped).
  std::string Rewrite(int index, const std::string& event);
  void Finish(int http_status, std::string body);  // under mu_

  const int n_;
  const bool streaming_;
  ResponseSink sink_;
  std::function<void()> cancel_all_;

  mutable std::mutex mu_;
  std::function<void(int)> progress_hook_;
  std::vector<bool> progressed_;
  std::vector<std::string> bodies_;
  std::string usage_chunk_;  // a formatter's usage chunk (JSON), the template for the merged one
  openai::Usage usage_;
  int remaining_;
  bool started_writing_ = false;
  bool finished_ = false;
};

}  // namespace m3::api
