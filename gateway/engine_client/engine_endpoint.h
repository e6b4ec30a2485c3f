// EngineEndpoint: the gateway's view of one `m3-engine serve` worker: its channel, whether it
// serves the gateway's model (ModelInfo checked once it answers), its health (periodic probes;
// ejected after consecutive failures, re-admitted after a success), and the requests the
// gateway has outstanding on it (the router's load signal).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine.grpc.pb.h"
#include "gateway/engine_client/expected_model.h"
#include "gateway/engine_client/generate_call.h"

namespace m3::engine_client {

struct EndpointOptions {
  std::chrono::milliseconds probe_timeout{1000};
  int failures_to_eject = 2;  // consecutive failed probes (or failed calls) before ejection
  int64_t max_message_bytes = int64_t{1} << 30;
  std::string api_key;  // the engines' shared key (m3-engine serve --api-key); empty: none
};

enum class EndpointState {
  kUnknown,       // not probed yet
  kHealthy,       // answered, serves our model
  kUnhealthy,     // ejected: probes or calls failed
  kIncompatible,  // serves another model: never used
};
std::string_view EndpointStateName(EndpointState state);

class EngineEndpoint : public std::enable_shared_from_this<EngineEndpoint> {
 public:
  EngineEndpoint(std::string address, ExpectedModel expected, EndpointOptions options = {});
  // Cancels the calls still running and waits until they are over, then drops the channel.
  // Must not run on a gRPC thread (the router owns its endpoints and never lets the last
  // reference go there).
  ~EngineEndpoint();
  EngineEndpoint(const EngineEndpoint&) = delete;
  EngineEndpoint& operator=(const EngineEndpoint&) = delete;

  const std::string& address() const { return address_; }

  // Blocking ModelInfo + check, for start-up. Returns the state reached; an unreachable engine
  // stays kUnhealthy (probes go on), one of another model becomes kIncompatible.
  EndpointState Connect();

  // One probe, blocking up to the probe timeout (ModelInfo until the model has been checked,
  // then Health); the result updates the state. Concurrent calls: one probes, the others
  // return at once.
  void Probe();

  // Starts a Generate stream; counts it as outstanding until on_done. A call that fails with
  // UNAVAILABLE (the engine is gone) ejects the engine until a probe succeeds.
  std::shared_ptr<GenerateCall> Generate(const engine::v1::GenerateRequest& request,
                                         GenerateCall::Callbacks callbacks);

  // Cancels the calls running on this engine and waits until each has ended (their on_done
  // has returned). Not from a gRPC thread.
  void CancelCalls() { live_calls_->CancelAndWait(); }
  size_t live_calls() const { return live_calls_->size(); }

  EndpointState state() const;
  bool healthy() const { return state() == EndpointState::kHealthy; }
  int outstanding() const { return outstanding_.load(); }
  std::optional<engine::v1::ModelInfoResponse> model_info() const;
  std::optional<engine::v1::HealthResponse> last_health() const;
  std::string last_error() const;

 private:
  void RecordSuccess();
  // `eject`: at once, not after failures_to_eject in a row.
  void RecordFailure(const std::string& error, bool eject = false);
  void OnModelInfo(const grpc::Status& status, const engine::v1::ModelInfoResponse& info);

  std::string address_;
  ExpectedModel expected_;
  EndpointOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<engine::v1::Engine::Stub> stub_;
  std::shared_ptr<LiveCalls> live_calls_ = std::make_shared<LiveCalls>();
  std::atomic<int> outstanding_{0};
  std::atomic<bool> probing_{false};

  mutable std::mutex mu_;
  EndpointState state_ = EndpointState::kUnknown;
  int failures_ = 0;
  std::optional<engine::v1::ModelInfoResponse> model_info_;
  std::optional<engine::v1::HealthResponse> health_;
  std::string last_error_;
};

}  // namespace m3::engine_client
