// The gRPC Preprocess service (proto/preprocess.proto) over the same pipeline and worker
// pool as HTTP: the callback API hands each call to the pool, so gRPC threads never do media
// work, and a full queue is RESOURCE_EXHAUSTED at once.
#pragma once

#include <memory>

#include "gateway/net/preprocess_service.h"
#include "gateway/net/worker_pool.h"
#include "preprocess.grpc.pb.h"

namespace m3::net {

class GrpcPreprocessService final : public m3::preprocess::v1::Preprocess::CallbackService {
 public:
  GrpcPreprocessService(std::shared_ptr<const PreprocessService> service,
                        std::shared_ptr<WorkerPool> pool)
      : service_(std::move(service)), pool_(std::move(pool)) {}

  grpc::ServerUnaryReactor* Preprocess(grpc::CallbackServerContext* context,
                                       const m3::preprocess::v1::PreprocessRequest* request,
                                       m3::preprocess::v1::PreprocessResponse* response) override;
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context,
                                   const m3::preprocess::v1::HealthRequest* request,
                                   m3::preprocess::v1::HealthResponse* response) override;

 private:
  std::shared_ptr<const PreprocessService> service_;
  std::shared_ptr<WorkerPool> pool_;
};

// Converts a gRPC request to the pipeline's request; throws ParamError for bad input.
PreprocessRequest FromProto(const m3::preprocess::v1::PreprocessRequest& request);

}  // namespace m3::net
