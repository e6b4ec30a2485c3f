// The callback-API Generate stream and the registry of live calls (see generate_call.h).
#include "gateway/engine_client/generate_call.h"

#include <vector>

namespace m3::engine_client {

void LiveCalls::Add(const std::shared_ptr<GenerateCall>& call) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.emplace(call.get(), call);
}

void LiveCalls::Remove(GenerateCall* call) {
  // Notified under the lock: once the waiter sees the set empty, its owner drops the channel.
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(call);
  if (calls_.empty()) cv_.notify_all();
}

void LiveCalls::CancelAndWait() {
  std::vector<std::shared_ptr<GenerateCall>> running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& entry : calls_) {
      if (auto call = entry.second.lock()) running.push_back(std::move(call));
    }
  }
  // Outside the lock: gRPC may run OnDone (and so Remove) before TryCancel returns.
  for (const auto& call : running) call->Cancel();
  running.clear();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return calls_.empty(); });
}

size_t LiveCalls::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_.size();
}

std::shared_ptr<GenerateCall> GenerateCall::Start(engine::v1::Engine::Stub& stub,
                                                  const engine::v1::GenerateRequest& request,
                                                  Callbacks callbacks,
                                                  std::shared_ptr<LiveCalls> live,
                                                  const std::string& authorization) {
  std::shared_ptr<GenerateCall> call(new GenerateCall(std::move(callbacks), std::move(live)));
  if (!authorization.empty()) call->context_->AddMetadata("authorization", authorization);
  call->request_ = request;
  call->self_ = call;
  call->live_->Add(call);
  stub.async()->Generate(call->context_.get(), &call->request_, call.get());
  call->StartRead(&call->response_);
  call->StartCall();
  return call;
}

void GenerateCall::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_.load()) context_->TryCancel();
}

void GenerateCall::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended: OnDone follows with the status
  if (callbacks_.on_response) callbacks_.on_response(std::move(response_));
  response_.Clear();
  StartRead(&response_);
}

void GenerateCall::OnDone(const grpc::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.store(true);
  }
  // The callbacks are released here: they may hold an owner of this call's handle, a cycle
  // otherwise. The handle the caller holds (if any) keeps this object alive beyond.
  Callbacks callbacks = std::move(callbacks_);
  callbacks_ = {};
  std::shared_ptr<GenerateCall> keep = std::move(self_);
  if (callbacks.on_done) callbacks.on_done(status);
  callbacks = {};
  // Not the channel's last reference: the owner waits for Remove before dropping its own.
  context_.reset();
  std::shared_ptr<LiveCalls> live = std::move(live_);
  live->Remove(this);
  // `keep` may free this object now: nothing below touches it.
}

}  // namespace m3::engine_client
