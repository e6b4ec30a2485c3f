// One engine worker's connection, health and load (see engine_endpoint.h).
#include "gateway/engine_client/engine_endpoint.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace m3::engine_client {

namespace v1 = engine::v1;

namespace {

void Authorize(grpc::ClientContext& context, const std::string& api_key) {
  if (!api_key.empty()) context.AddMetadata("authorization", "Bearer " + api_key);
}

}  // namespace

std::string_view EndpointStateName(EndpointState state) {
  switch (state) {
    case EndpointState::kUnknown:
      return "unknown";
    case EndpointState::kHealthy:
      return "healthy";
    case EndpointState::kUnhealthy:
      return "unhealthy";
    case EndpointState::kIncompatible:
      return "incompatible";
  }
  return "unknown";
}

EngineEndpoint::EngineEndpoint(std::string address, ExpectedModel expected, EndpointOptions options)
    : address_(std::move(address)), expected_(std::move(expected)), options_(options) {
  grpc::ChannelArguments args;
  const int max = static_cast<int>(std::min<int64_t>(options_.max_message_bytes, INT32_MAX));
  args.SetMaxSendMessageSize(max);
  args.SetMaxReceiveMessageSize(max);
  // A dead engine must be noticed by probes, not after the default reconnect backoff of
  // up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Engine::NewStub(channel_);
}

EngineEndpoint::~EngineEndpoint() {
  live_calls_->CancelAndWait();
}

EndpointState EngineEndpoint::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

std::optional<v1::ModelInfoResponse> EngineEndpoint::model_info() const {
  std::lock_guard<std::mutex> lock(mu_);
  return model_info_;
}

std::optional<v1::HealthResponse> EngineEndpoint::last_health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return health_;
}

std::string EngineEndpoint::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void EngineEndpoint::RecordSuccess() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == EndpointState::kIncompatible) return;
  failures_ = 0;
  if (model_info_) state_ = EndpointState::kHealthy;
}

void EngineEndpoint::RecordFailure(const std::string& error, bool eject) {
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = error;
  if (state_ == EndpointState::kIncompatible) return;
  ++failures_;
  if (eject || state_ == EndpointState::kUnknown || failures_ >= options_.failures_to_eject) {
    state_ = EndpointState::kUnhealthy;
  }
}

void EngineEndpoint::OnModelInfo(const grpc::Status& status, const v1::ModelInfoResponse& info) {
  if (!status.ok()) {
    RecordFailure("ModelInfo: " + status.error_message());
    return;
  }
  const std::string mismatch = ModelMismatch(expected_, info);
  std::lock_guard<std::mutex> lock(mu_);
  model_info_ = info;
  if (!mismatch.empty()) {
    state_ = EndpointState::kIncompatible;
    last_error_ = "engine " + address_ + " serves another model: " + mismatch;
    return;
  }
  failures_ = 0;
  state_ = EndpointState::kHealthy;
}

EndpointState EngineEndpoint::Connect() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.probe_timeout);
  context.set_wait_for_ready(true);  // the engine may still be binding its port
  Authorize(context, options_.api_key);
  v1::ModelInfoResponse info;
  const grpc::Status status = stub_->ModelInfo(&context, v1::ModelInfoRequest(), &info);
  OnModelInfo(status, info);
  return state();
}

void EngineEndpoint::Probe() {
  if (probing_.exchange(true)) return;
  bool verified;
  {
    std::lock_guard<std::mutex> lock(mu_);
    verified = model_info_.has_value();
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.probe_timeout);
  Authorize(context, options_.api_key);
  if (!verified) {
    v1::ModelInfoResponse info;
    const grpc::Status status = stub_->ModelInfo(&context, v1::ModelInfoRequest(), &info);
    OnModelInfo(status, info);
    probing_.store(false);
    return;
  }
  v1::HealthResponse health;
  const grpc::Status status = stub_->Health(&context, v1::HealthRequest(), &health);
  if (!status.ok()) {
    RecordFailure("Health: " + status.error_message());
  } else {
    {
      std::lock_guard<std::mutex> lock(mu_);
      health_ = health;
    }
    if (health.status() == v1::HealthResponse::STATUS_SERVING) {
      RecordSuccess();
    } else {
      RecordFailure("Health: the engine reports it is not serving");
    }
  }
  probing_.store(false);
}

std::shared_ptr<GenerateCall> EngineEndpoint::Generate(const v1::GenerateRequest& request,
                                                       GenerateCall::Callbacks callbacks) {
  outstanding_.fetch_add(1);
  auto on_done = std::move(callbacks.on_done);
  // `this` outlives the call: the destructor waits for every call's OnDone to be over. (A
  // weak reference locked here could become the last one and destroy the endpoint, and with
  // it the channel, on this gRPC thread.)
  callbacks.on_done = [this, on_done = std::move(on_done)](const grpc::Status& status) {
    outstanding_.fetch_sub(1);
    // The engine could not be reached, or its connection closed under a running request (its
    // process died): ejected at once, so the retry of this request and every new one go
    // elsewhere until a probe finds it serving again.
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      RecordFailure("Generate: " + status.error_message(), /*eject=*/true);
    }
    if (on_done) on_done(status);
  };
  return GenerateCall::Start(
      *stub_, request, std::move(callbacks), live_calls_,
      options_.api_key.empty() ? std::string() : "Bearer " + options_.api_key);
}

}  // namespace m3::engine_client
