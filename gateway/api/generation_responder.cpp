// A generation's events as the API's response (see generation_responder.h).
#include "gateway/api/generation_responder.h"

#include <string_view>
#include <utility>
#include <vector>

#include "shared/error.h"

namespace m3::api {
namespace {

using engine_client::GenerationErrorKind;

// How a failed generation reads to the client: the status and the OpenAI error code.
std::pair<int, std::string_view> StatusOf(GenerationErrorKind kind) {
  switch (kind) {
    case GenerationErrorKind::kInvalidRequest:
      return {400, "invalid_request"};
    case GenerationErrorKind::kBusy:
      return {429, "engine_busy"};
    case GenerationErrorKind::kNoEngine:
      return {503, "no_engine_available"};
    case GenerationErrorKind::kTimeout:
      return {504, "engine_timeout"};
    case GenerationErrorKind::kShuttingDown:
      return {503, "server_shutting_down"};
    case GenerationErrorKind::kEngineFailure:
      break;
  }
  return {502, "engine_error"};  // the engine failed in a way that is not the client's doing
}

class GenerationResponder : public engine_client::GenerationObserver {
 public:
  GenerationResponder(std::unique_ptr<openai::ResponseFormatter> formatter, ResponseSink sink,
                      FormatterFactory remake)
      : formatter_(std::move(formatter)), sink_(std::move(sink)), remake_(std::move(remake)) {}

  bool OnTokens(std::span<const int32_t> ids,
                std::span<const openai::TokenLogprob> logprobs) override {
    pushed_ = true;
    std::vector<std::string> events;
    if (formatter_->streaming() && !started_writing_) events = formatter_->Start();
    for (auto& e : formatter_->Push(ids, logprobs)) events.push_back(std::move(e));
    if (formatter_->streaming()) Write(std::move(events));
    return formatter_->output_finished();
  }

  void OnFinish(text::FinishReason reason, const openai::Usage& usage) override {
    std::string body;
    if (formatter_->streaming()) {
      std::vector<std::string> events;
      if (!started_writing_) events = formatter_->Start();
      for (auto& e : formatter_->Finish(reason, usage)) events.push_back(std::move(e));
      Write(std::move(events));
    } else {
      std::vector<std::string> out = formatter_->Finish(reason, usage);
      if (!out.empty()) body = std::move(out[0]);
    }
    if (sink_.finish) sink_.finish(200, std::move(body));
  }

  void OnError(const engine_client::GenerationError& error) override {
    const auto [status, code] = StatusOf(error.kind);
    if (formatter_->streaming() && started_writing_) {
      Write(formatter_->StreamErrorEvents(status, error.message, code));
      if (sink_.finish) sink_.finish(200, "");
    } else if (sink_.finish) {
      sink_.finish(status, formatter_->ErrorBody(status, error.message, code));
    }
  }

  void OnCancelled() override {
    if (sink_.finish) sink_.finish(499, "");
  }

  bool Restart() override {
    if (started_writing_) return false;  // the client has part of this attempt's answer
    if (!pushed_) return true;
    if (!remake_) return false;
    std::unique_ptr<openai::ResponseFormatter> fresh = remake_();
    if (!fresh) return false;
    formatter_ = std::move(fresh);
    pushed_ = false;
    return true;
  }

 private:
  void Write(std::vector<std::string> events) {
    if (events.empty()) return;
    started_writing_ = true;
    std::string text;
    for (auto& e : events) text += e;
    if (sink_.write) sink_.write(std::move(text));
  }

  std::unique_ptr<openai::ResponseFormatter> formatter_;
  ResponseSink sink_;
  FormatterFactory remake_;
  bool started_writing_ = false;
  bool pushed_ = false;  // the formatter has been given tokens
};

}  // namespace

std::shared_ptr<engine_client::GenerationObserver> MakeGenerationResponder(
    std::unique_ptr<openai::ResponseFormatter> formatter, ResponseSink sink,
    FormatterFactory remake) {
  Require(formatter != nullptr, ErrorCode::kInternal, "a responder needs a formatter");
  return std::make_shared<GenerationResponder>(std::move(formatter), std::move(sink),
                                               std::move(remake));
}

}  // namespace m3::api
