// Token timing at the formatter (see timed_formatter.h).
#include "gateway/api/timed_formatter.h"

#include <optional>

namespace m3::api {
namespace {

using Clock = std::chrono::steady_clock;

class TimedFormatter : public openai::ResponseFormatter {
 public:
  TimedFormatter(std::unique_ptr<openai::ResponseFormatter> inner, ApiMetrics& metrics,
                 Clock::time_point arrival)
      : inner_(std::move(inner)), metrics_(metrics), arrival_(arrival) {}

  bool streaming() const override { return inner_->streaming(); }
  std::vector<std::string> Start() override { return inner_->Start(); }
  std::vector<std::string> Push(std::span<const int32_t> ids,
                                std::span<const openai::TokenLogprob> logprobs) override {
    if (!ids.empty()) {
      const Clock::time_point now = Clock::now();
      if (!last_) {
        metrics_.RecordFirstToken(std::chrono::duration<double>(now - arrival_).count());
      } else {
        // Several tokens in one engine response share its gap.
        const double gap =
            std::chrono::duration<double>(now - *last_).count() / static_cast<double>(ids.size());
        for (size_t i = 0; i < ids.size(); ++i) metrics_.RecordInterToken(gap);
      }
      last_ = now;
    }
    return inner_->Push(ids, logprobs);
  }
  std::vector<std::string> Finish(text::FinishReason engine_reason,
                                  const openai::Usage& usage) override {
    return inner_->Finish(engine_reason, usage);
  }
  bool output_finished() const override { return inner_->output_finished(); }
  std::string ErrorBody(int status, std::string_view message,
                        std::string_view code) const override {
    return inner_->ErrorBody(status, message, code);
  }
  std::vector<std::string> StreamErrorEvents(int status, std::string_view message,
                                             std::string_view code) const override {
    return inner_->StreamErrorEvents(status, message, code);
  }

 private:
  std::unique_ptr<openai::ResponseFormatter> inner_;
  ApiMetrics& metrics_;
  Clock::time_point arrival_;
  std::optional<Clock::time_point> last_;
};

}  // namespace

std::unique_ptr<openai::ResponseFormatter> MakeTimedFormatter(
    std::unique_ptr<openai::ResponseFormatter> inner, ApiMetrics& metrics,
    Clock::time_point arrival) {
  return std::make_unique<TimedFormatter>(std::move(inner), metrics, arrival);
}

}  // namespace m3::api
