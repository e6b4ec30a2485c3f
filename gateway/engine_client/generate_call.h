// GenerateCall: one streaming Generate RPC to an engine on gRPC's callback API (no thread per
// stream): responses are handed to a callback in order as they arrive, the final status once.
// Cancel() ends the call from the client side (a client that went away): the engine sees the
// cancellation and aborts the request, freeing its KV pages.
//
// Lifetime (the cause of an abort at exit once): a started ClientContext holds a reference to
// its grpc::Channel, and dropping a channel's last reference on one of gRPC's callback threads
// shuts down and frees the completion queue that thread is still polling (a double free, or
// "assertion failed: prior > 0" in gRPC's ref counting). So the context is released inside
// OnDone, and every call is registered in its channel owner's LiveCalls, which waits for the
// calls to be over before the owner drops the channel on its own thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "engine.grpc.pb.h"

namespace m3::engine_client {

class GenerateCall;

// The calls in flight on one channel. CancelAndWait (from the channel owner's destructor, on a
// thread that is not gRPC's) returns once every call has run OnDone and let go of its context.
class LiveCalls {
 public:
  void Add(const std::shared_ptr<GenerateCall>& call);
  void Remove(GenerateCall* call);  // the call's last act; notifies the waiter
  void CancelAndWait();
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<GenerateCall*, std::weak_ptr<GenerateCall>> calls_;
};

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
  // alive until on_done has run. `live`: the channel owner's registry of calls.
  // `authorization`: the "authorization" metadata value to send (empty: none).
  static std::shared_ptr<GenerateCall> Start(engine::v1::Engine::Stub& stub,
                                             const engine::v1::GenerateRequest& request,
                                             Callbacks callbacks, std::shared_ptr<LiveCalls> live,
                                             const std::string& authorization = {});

  // Idempotent; safe from any thread, also after the call has ended.
  void Cancel();
  bool done() const { return done_.load(); }

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  GenerateCall(Callbacks callbacks, std::shared_ptr<LiveCalls> live)
      : callbacks_(std::move(callbacks)), live_(std::move(live)) {}

  // Reset at the end of OnDone: it holds the channel (see the top of this file).
  std::unique_ptr<grpc::ClientContext> context_ = std::make_unique<grpc::ClientContext>();
  engine::v1::GenerateRequest request_;
  engine::v1::GenerateResponse response_;
  Callbacks callbacks_;
  std::shared_ptr<LiveCalls> live_;
  std::mutex mu_;  // orders Cancel against the end of the call
  std::atomic<bool> done_{false};
  std::shared_ptr<GenerateCall> self_;  // held while the call runs
};

}  // namespace m3::engine_client
