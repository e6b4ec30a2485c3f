// The callback-API Generate stream (see generate_call.h).
#include "gateway/engine_client/generate_call.h"

namespace m3::engine_client {

std::shared_ptr<GenerateCall> GenerateCall::Start(engine::v1::Engine::Stub& stub,
                                                  const engine::v1::GenerateRequest& request,
                                                  Callbacks callbacks) {
  std::shared_ptr<GenerateCall> call(new GenerateCall(std::move(callbacks)));
  call->request_ = request;
  call->self_ = call;
  stub.async()->Generate(&call->context_, &call->request_, call.get());
  call->StartRead(&call->response_);
  call->StartCall();
  return call;
}

void GenerateCall::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_.load()) context_.TryCancel();
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
  // otherwise.
  Callbacks callbacks = std::move(callbacks_);
  callbacks_ = {};
  if (callbacks.on_done) callbacks.on_done(status);
  // Last touch of this object: the handle the caller holds (if any) keeps it alive beyond.
  std::shared_ptr<GenerateCall> keep = std::move(self_);
}

}  // namespace m3::engine_client
