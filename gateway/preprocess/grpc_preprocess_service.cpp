// gRPC Preprocess service (see grpc_preprocess_service.h).
#include "gateway/preprocess/grpc_preprocess_service.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include "gateway/net/api_error.h"
#include "shared/log.h"

namespace m3::preprocess {
namespace {

namespace pb = m3::preprocess::v1;

grpc::Status ToStatus(const Error& e) {
  return grpc::Status(static_cast<grpc::StatusCode>(net::GrpcStatusCodeFor(e.code())), e.what());
}

void FillResponse(const PreprocessResult& result, pb::PreprocessResponse* response) {
  for (const auto& [name, t] : result.tensors) {
    m3::proto::Tensor& out = (*response->mutable_tensors())[name];
    out.set_dtype(std::string(DTypeName(t.dtype())));
    for (int64_t d : t.shape()) out.add_shape(d);
    out.set_data(reinterpret_cast<const char*>(t.data()), t.nbytes());
  }
  for (const auto& m : result.items) {
    pb::ItemResult* item = response->add_items();
    item->set_kind(m.kind == content::MediaKind::kImage ? pb::MEDIA_KIND_IMAGE
                                                        : pb::MEDIA_KIND_VIDEO);
    for (int64_t g : m.grid_thw) item->add_grid_thw(g);
    for (double ts : m.timestamps) item->add_timestamps(ts);
    item->set_placeholder_tokens(m.placeholder_tokens);
    item->set_prompt_expansion(m.prompt_expansion);
  }
}

}  // namespace

PreprocessRequest FromProto(const pb::PreprocessRequest& request) {
  PreprocessRequest out;
  if (request.items_size() == 0)
    throw net::ParamError(ErrorCode::kInvalidArgument, "the request has no items", "items");
  for (int i = 0; i < request.items_size(); ++i) {
    const pb::MediaItem& item = request.items(i);
    std::string at = "items[" + std::to_string(i) + "]";
    content::MediaRef ref;
    if (item.kind() == pb::MEDIA_KIND_IMAGE)
      ref.kind = content::MediaKind::kImage;
    else if (item.kind() == pb::MEDIA_KIND_VIDEO)
      ref.kind = content::MediaKind::kVideo;
    else
      throw net::ParamError(ErrorCode::kInvalidArgument, at + ".kind must be IMAGE or VIDEO",
                            at + ".kind");
    if (item.source_case() == pb::MediaItem::kUrl) {
      ref.url = item.url();
      ref.param = at + ".url";
      if (ref.url.empty())
        throw net::ParamError(ErrorCode::kInvalidArgument, ref.param + " is empty", ref.param);
    } else if (item.source_case() == pb::MediaItem::kData) {
      ref.bytes = item.data();
      ref.param = at + ".data";
    } else {
      throw net::ParamError(ErrorCode::kInvalidArgument, at + " needs url or data", at);
    }
    out.items.push_back(std::move(ref));
  }
  const pb::MediaOptions& o = request.options();
  auto positive = [](bool has, int64_t v, const char* name) -> std::optional<int64_t> {
    if (!has) return std::nullopt;
    if (v <= 0)
      throw net::ParamError(ErrorCode::kInvalidArgument,
                            std::string("options.") + name + " must be positive", name);
    return v;
  };
  out.options.min_pixels = positive(o.has_min_pixels(), o.min_pixels(), "min_pixels");
  out.options.max_pixels = positive(o.has_max_pixels(), o.max_pixels(), "max_pixels");
  out.options.min_frames = positive(o.has_min_frames(), o.min_frames(), "min_frames");
  out.options.max_frames = positive(o.has_max_frames(), o.max_frames(), "max_frames");
  if (o.has_fps()) {
    if (!(o.fps() > 0))
      throw net::ParamError(ErrorCode::kInvalidArgument, "options.fps must be positive", "fps");
    out.options.fps = o.fps();
  }
  out.options.all_frames = o.has_all_frames() && o.all_frames();
  return out;
}

grpc::ServerUnaryReactor* GrpcPreprocessService::Preprocess(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  PreprocessRequest admitted;
  try {
    pb::PreprocessRequest message;
    grpc::ByteBuffer copy(*request);  // Deserialize consumes its buffer
    const grpc::Status parsed =
        grpc::SerializationTraits<pb::PreprocessRequest>::Deserialize(&copy, &message);
    if (!parsed.ok()) {
      reactor->Finish(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       "the request is not a valid m3.preprocess.v1.PreprocessRequest message (" +
                           std::to_string(request->Length()) + " bytes could not be parsed)"));
      return reactor;
    }
    admitted = FromProto(message);
    service_->Admit(admitted);
  } catch (const Error& e) {
    reactor->Finish(ToStatus(e));
    return reactor;
  }
  StartPreprocess(service_, pools_, std::move(admitted),
                  [reactor, response](PreprocessResult* result, std::exception_ptr error) {
                    grpc::Status status;
                    try {
                      if (error) std::rethrow_exception(error);
                      pb::PreprocessResponse message;
                      FillResponse(*result, &message);
                      bool own = false;
                      status = grpc::SerializationTraits<pb::PreprocessResponse>::Serialize(
                          message, response, &own);
                    } catch (const Error& e) {
                      status = ToStatus(e);
                    } catch (const std::exception& e) {
                      Log(LogLevel::kError, "grpc preprocess failed: ", e.what());
                      status = grpc::Status(grpc::StatusCode::INTERNAL, "internal error");
                    }
                    reactor->Finish(status);
                  });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcPreprocessService::Health(grpc::CallbackServerContext* context,
                                                        const pb::HealthRequest*,
                                                        pb::HealthResponse* response) {
  response->set_ok(true);
  response->set_queued(pools_.workers->queued());
  response->set_running(pools_.workers->running());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace m3::preprocess
