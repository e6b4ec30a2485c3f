// Response metrics at the exchange (see metered_exchange.h).
#include "gateway/api/metered_exchange.h"

#include <atomic>

namespace m3::api {
namespace {

using Clock = std::chrono::steady_clock;

class MeteredExchange : public net::HttpExchange {
 public:
  MeteredExchange(std::shared_ptr<net::HttpExchange> inner, ApiMetrics& metrics,
                  std::string endpoint, Clock::time_point arrival)
      : inner_(std::move(inner)),
        metrics_(metrics),
        endpoint_(std::move(endpoint)),
        arrival_(arrival) {}
  ~MeteredExchange() override { Record(inner_->connected() ? status_.load() : 499); }

  void Respond(net::HttpResponse response) override {
    // An answer to a client that has already gone (e.g. the error that ends work abandoned for
    // it) reaches nobody: it counts as 499, not as its status.
    const int status = inner_->connected() ? response.result_int() : 499;
    inner_->Respond(std::move(response));
    Record(status);
  }
  void StartStream(net::HttpResponse head) override {
    status_ = head.result_int();
    inner_->StartStream(std::move(head));
  }
  bool Write(std::string data) override { return inner_->Write(std::move(data)); }
  void EndStream() override {
    inner_->EndStream();
    Record(status_.load());
  }
  void OnDisconnect(std::function<void()> callback) override {
    inner_->OnDisconnect(std::move(callback));
  }
  bool connected() const override { return inner_->connected(); }

 private:
  void Record(int status) {
    if (recorded_.exchange(true)) return;
    metrics_.RecordRequest(endpoint_, status,
                           std::chrono::duration<double>(Clock::now() - arrival_).count());
  }

  std::shared_ptr<net::HttpExchange> inner_;
  ApiMetrics& metrics_;
  std::string endpoint_;
  Clock::time_point arrival_;
  std::atomic<int> status_{499};
  std::atomic<bool> recorded_{false};
};

}  // namespace

std::shared_ptr<net::HttpExchange> MakeMeteredExchange(std::shared_ptr<net::HttpExchange> inner,
                                                       ApiMetrics& metrics, std::string endpoint,
                                                       Clock::time_point arrival) {
  return std::make_shared<MeteredExchange>(std::move(inner), metrics, std::move(endpoint), arrival);
}

}  // namespace m3::api
