// The n choices of a request merged into one response (see choice_fan_in.h).
#include "gateway/api/choice_fan_in.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "gateway/openai/response_json.h"
#include "gateway/openai/sse.h"

namespace m3::api {
namespace {

using OJson = nlohmann::ordered_json;

std::string Dump(const OJson& j) {
  return j.dump(-1, ' ', false, OJson::error_handler_t::replace);
}

constexpr std::string_view kDataPrefix = "data: ";

std::pair<int, std::string_view> StatusOf(engine_client::GenerationErrorKind kind) {
  using K = engine_client::GenerationErrorKind;
  switch (kind) {
    case K::kInvalidRequest:
      return {400, "invalid_request"};
    case K::kBusy:
      return {429, "engine_busy"};
    case K::kNoEngine:
      return {503, "no_engine_available"};
    case K::kTimeout:
      return {504, "engine_timeout"};
    case K::kShuttingDown:
      return {503, "server_shutting_down"};
    case K::kEngineFailure:
      break;
  }
  return {502, "engine_error"};
}

// One choice: its formatter, reporting to the fan-in (calls for one choice are never
// concurrent; the fan-in orders the choices' writes).
class ChoiceObserver : public engine_client::GenerationObserver {
 public:
  ChoiceObserver(std::shared_ptr<ChoiceFanIn> fan, int index, FormatterFactory make)
      : fan_(std::move(fan)), index_(index), make_(std::move(make)), formatter_(make_()) {}

  bool OnTokens(std::span<const int32_t> ids,
                std::span<const openai::TokenLogprob> logprobs) override {
    pushed_ = true;
    std::vector<std::string> events;
    if (formatter_->streaming() && !started_) events = formatter_->Start(), started_ = true;
    for (auto& e : formatter_->Push(ids, logprobs)) events.push_back(std::move(e));
    if (formatter_->streaming()) fan_->Write(index_, std::move(events));
    fan_->Progress(index_);
    return formatter_->output_finished();
  }

  void OnFinish(text::FinishReason reason, const openai::Usage& usage) override {
    std::string body;
    if (formatter_->streaming()) {
      std::vector<std::string> events;
      if (!started_) events = formatter_->Start(), started_ = true;
      for (auto& e : formatter_->Finish(reason, usage)) events.push_back(std::move(e));
      fan_->Write(index_, std::move(events));
    } else {
      std::vector<std::string> out = formatter_->Finish(reason, usage);
      if (!out.empty()) body = std::move(out[0]);
    }
    fan_->Progress(index_);
    fan_->Done(index_, usage, std::move(body));
  }

  void OnError(const engine_client::GenerationError& error) override {
    const auto [status, code] = StatusOf(error.kind);
    fan_->Fail(index_, status, formatter_->ErrorBody(status, error.message, code),
               formatter_->StreamErrorEvents(status, error.message, code));
    fan_->Progress(index_);  // after Fail: the choices not started yet stay so
  }

  void OnCancelled() override { fan_->Cancelled(); }

  bool Restart() override {
    if (fan_->started_writing() || started_) return false;
    if (!pushed_) return true;
    std::unique_ptr<openai::ResponseFormatter> fresh = make_();
    if (!fresh) return false;
    formatter_ = std::move(fresh);
    pushed_ = false;
    return true;
  }

 private:
  std::shared_ptr<ChoiceFanIn> fan_;
  int index_;
  FormatterFactory make_;
  std::unique_ptr<openai::ResponseFormatter> formatter_;
  bool started_ = false;  // Start() events made (streaming)
  bool pushed_ = false;
};

}  // namespace

ChoiceFanIn::ChoiceFanIn(int n, bool streaming, ResponseSink sink, std::function<void()> cancel_all)
    : n_(n),
      streaming_(streaming),
      sink_(std::move(sink)),
      cancel_all_(std::move(cancel_all)),
      progressed_(static_cast<size_t>(n), false),
      bodies_(static_cast<size_t>(n)),
      remaining_(n) {}

std::shared_ptr<engine_client::GenerationObserver> ChoiceFanIn::Observer(int index,
                                                                         FormatterFactory make) {
  return std::make_shared<ChoiceObserver>(shared_from_this(), index, std::move(make));
}

void ChoiceFanIn::OnFirstProgress(std::function<void(int)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_hook_ = std::move(hook);
}

bool ChoiceFanIn::started_writing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_writing_;
}

void ChoiceFanIn::Progress(int index) {
  std::function<void(int)> hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (progressed_[static_cast<size_t>(index)]) return;
    progressed_[static_cast<size_t>(index)] = true;
    hook = progress_hook_;
  }
  if (hook) hook(index);
}

std::string ChoiceFanIn::Rewrite(int index, const std::string& event) {
  if (event == openai::SseDone()) return "";
  if (event.compare(0, kDataPrefix.size(), kDataPrefix) != 0) return event;
  OJson j = OJson::parse(event.substr(kDataPrefix.size()), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return event;
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array()) return event;  // an error object
  if (choices->empty()) {
    // The choice's usage chunk: the merged one goes out when the last choice ends.
    if (j.contains("usage") && !j["usage"].is_null()) usage_chunk_ = Dump(j);
    return "";
  }
  for (OJson& c : *choices) c["index"] = index;
  return std::string(kDataPrefix) + Dump(j) + "\n\n";
}

void ChoiceFanIn::Write(int index, std::vector<std::string> events) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  std::string text;
  for (const std::string& e : events) text += Rewrite(index, e);
  if (text.empty()) return;
  started_writing_ = true;
  if (sink_.write) sink_.write(std::move(text));
}

void ChoiceFanIn::Done(int index, const openai::Usage& usage, std::string body) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  // The prompt is the same for every choice: counted once, as OpenAI does.
  if (usage_.prompt_tokens == 0) {
    usage_.prompt_tokens = usage.prompt_tokens;
    usage_.cached_prompt_tokens = usage.cached_prompt_tokens;
  }
  usage_.completion_tokens += usage.completion_tokens;
  bodies_[static_cast<size_t>(index)] = std::move(body);
  if (--remaining_ > 0) return;
  if (streaming_) {
    std::string tail;
    if (!usage_chunk_.empty()) {
      OJson u = OJson::parse(usage_chunk_);
      u["usage"] = openai::UsageJson(usage_);
      tail += std::string(kDataPrefix) + Dump(u) + "\n\n";
    }
    tail += openai::SseDone();
    started_writing_ = true;
    if (sink_.write) sink_.write(std::move(tail));
    return Finish(200, "");
  }
  OJson merged = OJson::parse(bodies_[0], nullptr, false);
  if (merged.is_discarded() || !merged.is_object()) return Finish(200, bodies_[0]);
  OJson choices = OJson::array();
  for (int i = 0; i < n_; ++i) {
    OJson b = OJson::parse(bodies_[static_cast<size_t>(i)], nullptr, false);
    if (b.is_discarded() || !b.contains("choices")) continue;
    for (OJson& c : b["choices"]) {
      c["index"] = i;
      choices.push_back(std::move(c));
    }
  }
  merged["choices"] = std::move(choices);
  merged["usage"] = openai::UsageJson(usage_);
  Finish(200, Dump(merged));
}

void ChoiceFanIn::Fail(int index, int http_status, const std::string& body,
                       const std::vector<std::string>& stream_events) {
  (void)index;
  std::function<void()> cancel;
  std::string text;
  int status = http_status;
  std::string answer = body;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;  // nothing else is written from now on
    if (streaming_ && started_writing_) {
      for (const std::string& e : stream_events) text += e;
      status = 200;
      answer.clear();
    }
    cancel = cancel_all_;
  }
  // The other choices are cancelled before the sink's finish drops their sessions; their
  // OnCancelled finds the response finished.
  if (cancel) cancel();
  if (!text.empty() && sink_.write) sink_.write(std::move(text));
  if (sink_.finish) sink_.finish(status, std::move(answer));
}

bool ChoiceFanIn::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

void ChoiceFanIn::Cancelled() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!finished_) Finish(499, "");
}

void ChoiceFanIn::Finish(int http_status, std::string body) {
  finished_ = true;
  if (sink_.finish) sink_.finish(http_status, std::move(body));
}

}  // namespace m3::api
