// EngineService: the gRPC Engine service (proto/engine.proto) on the callback API, over an
// EngineCore. Generate is a server-streaming reactor fed by the engine thread (no thread per
// stream); outputs that arrive while a write is in flight are merged into the next message. A
// cancelled or vanished client aborts its request at once, which frees its KV pages.
#pragma once

#include <memory>
#include <string>

#include "engine.grpc.pb.h"
#include "engine/runtime/engine_core.h"
#include "engine/server/structured_output.h"

namespace m3::engine::server {

struct ServiceInfo {
  std::string model_name;
  int64_t max_message_bytes = 0;
  std::string api_key;                                         // empty: no authentication
  std::shared_ptr<const StructuredOutputCompiler> structured;  // null: refused
};

class EngineService final : public v1::Engine::CallbackService {
 public:
  EngineService(EngineCore& core, ServiceInfo info) : core_(core), info_(std::move(info)) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const v1::AbortRequest* request,
                                  v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context,
                                   const v1::HealthRequest* request,
                                   v1::HealthResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfo(grpc::CallbackServerContext* context,
                                      const v1::ModelInfoRequest* request,
                                      v1::ModelInfoResponse* response) override;

 private:
  EngineCore& core_;
  ServiceInfo info_;
};

// The gRPC status for an m3::Error code.
grpc::StatusCode GrpcCode(ErrorCode code);

}  // namespace m3::engine::server
