// EngineService: the unary RPCs (Abort, Health, ModelInfo) and the Generate entry point.
#include "engine/server/engine_service.h"

#include "engine/server/api_key_check.h"
#include "engine/server/generate_reactor.h"

namespace m3::engine::server {
namespace {

// A Generate stream refused before it starts (no API key): finishes at once.
class RefusedGenerate final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit RefusedGenerate(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// The unary reactor finished with `status`.
grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* context, grpc::Status status) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

}  // namespace

grpc::StatusCode GrpcCode(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnprocessable:
    case ErrorCode::kUnsupported:
    case ErrorCode::kDataLoss:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::kTooLarge:
    case ErrorCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorCode::kPermissionDenied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case ErrorCode::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::UNKNOWN;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* EngineService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  if (grpc::Status auth = CheckApiKey(*context, info_.api_key); !auth.ok())
    return new RefusedGenerate(std::move(auth));
  return new GenerateReactor(core_, *request, info_.structured.get());
}

grpc::ServerUnaryReactor* EngineService::Abort(grpc::CallbackServerContext* context,
                                               const v1::AbortRequest* request,
                                               v1::AbortResponse* response) {
  if (grpc::Status auth = CheckApiKey(*context, info_.api_key); !auth.ok())
    return Refuse(context, std::move(auth));
  response->set_found(core_.Abort(request->request_id()));
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* EngineService::Health(grpc::CallbackServerContext* context,
                                                const v1::HealthRequest* request,
                                                v1::HealthResponse* response) {
  if (grpc::Status auth = CheckApiKey(*context, info_.api_key); !auth.ok())
    return Refuse(context, std::move(auth));
  const EngineStats s = core_.Stats();
  response->set_status(s.accepting ? v1::HealthResponse::STATUS_SERVING
                                   : v1::HealthResponse::STATUS_NOT_SERVING);
  response->set_model(info_.model_name);
  response->set_running_requests(static_cast<int32_t>(s.running));
  response->set_waiting_requests(static_cast<int32_t>(s.waiting));
  response->set_kv_cache_usage(static_cast<float>(s.kv_usage));
  response->set_max_model_len(static_cast<int32_t>(core_.info().max_model_len));
  response->set_kv_pages(s.kv_pages);
  response->set_kv_pages_used(s.kv_pages_used);
  response->set_kv_pages_cached(s.kv_pages_cached);
  response->set_kv_page_size(static_cast<int32_t>(s.page_size));
  response->set_preemptions(s.preemptions);
  response->set_generated_tokens(s.generated_tokens);
  response->set_prefix_cache_hit_tokens(s.prefix_hit_tokens);
  response->set_spec_draft_tokens(s.spec_proposed);
  response->set_spec_accepted_tokens(s.spec_accepted);
  response->set_spec_verifies(s.spec_steps);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* EngineService::ModelInfo(grpc::CallbackServerContext* context,
                                                   const v1::ModelInfoRequest* request,
                                                   v1::ModelInfoResponse* r) {
  if (grpc::Status auth = CheckApiKey(*context, info_.api_key); !auth.ok())
    return Refuse(context, std::move(auth));
  const RunnerInfo& i = core_.info();
  const EngineConfig& c = core_.config();
  r->set_model(info_.model_name);
  r->set_architecture(i.architecture);
  r->set_vocab_size(i.vocab_size);
  r->set_max_model_len(i.max_model_len);
  r->set_max_prompt_tokens(core_.max_prompt_tokens());
  for (int64_t e : i.eos_token_ids) r->add_eos_token_ids(e);
  r->set_bos_token_id(i.bos_token_id);
  r->set_image_token_id(i.image_token_id);
  r->set_video_token_id(i.video_token_id);
  r->set_patch_size(i.patch_size);
  r->set_temporal_patch_size(i.temporal_patch_size);
  r->set_spatial_merge_size(i.spatial_merge_size);
  r->set_patch_dim(i.patch_dim);
  r->set_vision_segment_max_frames(i.vision_segment_max_frames);
  r->set_dtype(i.dtype);
  r->set_device(i.device);
  r->add_pixel_dtypes("F32");
  r->add_pixel_dtypes("BF16");
  // The CPU backend computes in f32: F32 pixels lose nothing; elsewhere BF16 halves the bytes.
  r->set_preferred_pixel_dtype(i.device == "cpu" ? "F32" : "BF16");
  r->set_hidden_size(i.hidden_size);
  r->set_num_layers(i.num_layers);
  r->set_kv_page_size(static_cast<int32_t>(c.page_size));
  r->set_kv_pages(c.kv_pages);
  r->set_max_num_seqs(static_cast<int32_t>(c.scheduler.max_num_seqs));
  r->set_max_batched_tokens(static_cast<int32_t>(c.scheduler.max_batched_tokens));
  r->set_max_message_bytes(info_.max_message_bytes);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace m3::engine::server
