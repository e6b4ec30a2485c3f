// GenerateCall: one streaming Generate RPC to an engine on gRPC's callback API (no thread per
// stream): responses are handed to a callback in order as they arrive, the final status once.
// Cancel() ends the call from the client side (a client that went away): the engine sees the
// cancellation and aborts the request, freeing its KV pages.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "engine.grpc.pb.h"

namespace m3::engine_client {

class GenerateCall : public grpc::ClientReadReactor<engine::v1::GenerateResponse> {
 public:
  struct Callbacks {
    // Each response, in order, on a gRPC thread; must not block for long (it holds up the
    // next read of this stream only).
    std::function<void(engine::v1::GenerateResponse&&)> on_response;
    // Exactly once, after the last response: OK when the engine finished the request.
    std::function<void(const grpc::Status&)> on_done;
  };

  // Starts the call. The returned handle may be dropped at any time: the call keeps itself
  // alive until on_done has run.
  static std::shared_ptr<GenerateCall> Start(engine::v1::Engine::Stub& stub,
                                             const engine::v1::GenerateRequest& request,
                                             Callbacks callbacks);

  // Idempotent; safe from any thread, also after the call has ended.
  void Cancel();
  bool done() const { return done_.load(); }

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  explicit GenerateCall(Callbacks callbacks) : callbacks_(std::move(callbacks)) {}

  grpc::ClientContext context_;
  engine::v1::GenerateRequest request_;
  engine::v1::GenerateResponse response_;
  Callbacks callbacks_;
  std::mutex mu_;  // orders Cancel against the end of the call
  std::atomic<bool> done_{false};
  std::shared_ptr<GenerateCall> self_;  // held while the call runs
};

}  // namespace m3::engine_client
