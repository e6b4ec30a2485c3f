// The gRPC Preprocess service (proto/preprocess.proto) over the same pipeline and pools as
// HTTP: a call is admitted on the gRPC thread (bad input is INVALID_ARGUMENT at once), then
// staged by StartPreprocess, so gRPC threads never do media work, and a full queue is
// RESOURCE_EXHAUSTED at once. Preprocess takes the raw message bytes and parses them itself:
// gRPC's own deserialization failure would answer a malformed message with a status that
// names nothing; here it is INVALID_ARGUMENT saying what could not be parsed.
#pragma once

#include <memory>

#include "gateway/preprocess/preprocess_pipeline.h"
#include "preprocess.grpc.pb.h"

namespace m3::preprocess {

class GrpcPreprocessService final
    : public m3::preprocess::v1::Preprocess::WithRawCallbackMethod_Preprocess<
          m3::preprocess::v1::Preprocess::WithCallbackMethod_Health<
              m3::preprocess::v1::Preprocess::Service>> {
 public:
  GrpcPreprocessService(std::shared_ptr<const PreprocessService> service, PreprocessPools pools)
      : service_(std::move(service)), pools_(std::move(pools)) {}

  grpc::ServerUnaryReactor* Preprocess(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context,
                                   const m3::preprocess::v1::HealthRequest* request,
                                   m3::preprocess::v1::HealthResponse* response) override;

 private:
  std::shared_ptr<const PreprocessService> service_;
  PreprocessPools pools_;
};

// Converts a gRPC request to the pipeline's request; throws net::ParamError for bad input.
PreprocessRequest FromProto(const m3::preprocess::v1::PreprocessRequest& request);

}  // namespace m3::preprocess
