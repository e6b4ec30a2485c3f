// HttpExchange over a Responder (see responder_exchange.h).
#include "gateway/api/responder_exchange.h"

#include <mutex>

namespace m3::api {
namespace {

class ResponderExchange : public net::HttpExchange {
 public:
  ResponderExchange(net::Responder respond, size_t max_bytes)
      : respond_(std::move(respond)), max_bytes_(max_bytes) {}

  void Respond(net::HttpResponse response) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (done_ || started_) return;
    done_ = true;
    lock.unlock();
    respond_(std::move(response));
  }
  void StartStream(net::HttpResponse head) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_ || started_) return;
    started_ = true;
    head_ = std::move(head);
    head_.body().clear();
  }
  bool Write(std::string data) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_ || done_ || head_.body().size() + data.size() > max_bytes_) return false;
    head_.body() += data;
    return true;
  }
  void EndStream() override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!started_ || done_) return;
    done_ = true;
    net::HttpResponse res = std::move(head_);
    lock.unlock();
    res.prepare_payload();
    respond_(std::move(res));
  }
  void OnDisconnect(std::function<void()>) override {}
  bool connected() const override { return true; }

 private:
  net::Responder respond_;
  size_t max_bytes_;
  std::mutex mu_;
  bool started_ = false;
  bool done_ = false;
  net::HttpResponse head_;
};

}  // namespace

net::HttpHandler AdaptExchangeHandler(net::ExchangeHandler handler, size_t max_stream_bytes) {
  return [handler = std::move(handler), max_stream_bytes](net::HttpRequest&& request,
                                                          net::Responder respond) {
    handler(std::move(request),
            std::make_shared<ResponderExchange>(std::move(respond), max_stream_bytes));
  };
}

}  // namespace m3::api
