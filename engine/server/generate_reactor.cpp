// GenerateReactor: submission, output merging, write pumping, cancellation.
#include "engine/server/generate_reactor.h"

#include "engine/server/engine_service.h"
#include "engine/server/proto_convert.h"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::server {

GenerateReactor::GenerateReactor(EngineCore& core, const v1::GenerateRequest& request,
                                 const StructuredOutputCompiler* structured)
    : core_(core), state_(std::make_shared<State>()) {
  state_->reactor = this;
  try {
    EngineRequest r = FromProto(request, core_, structured);
    id_ = r.id;
    std::weak_ptr<State> weak = state_;
    core_.Submit(std::move(r), [weak](RequestOutput&& out) {
      if (auto s = weak.lock()) Push(s, std::move(out));
    });
  } catch (const Error& e) {
    std::lock_guard<std::recursive_mutex> lock(state_->mu);
    state_->finished = true;
    Finish(grpc::Status(GrpcCode(e.code()), e.what()));
  }
}

void GenerateReactor::Push(const std::shared_ptr<State>& s, RequestOutput&& out) {
  std::lock_guard<std::recursive_mutex> lock(s->mu);
  if (s->reactor == nullptr || s->finished) return;
  if (out.finish == FinishReason::kError) {
    s->final_status = grpc::Status(GrpcCode(out.error_code), out.error);
    s->final_queued = true;
    s->reactor->Pump();
    return;
  }
  AppendOutput(out, &s->pending);
  s->has_pending = true;
  if (out.finish != FinishReason::kNone) s->final_queued = true;
  s->reactor->Pump();
}

void GenerateReactor::Pump() {
  State& s = *state_;
  if (s.writing || s.finished) return;
  if (s.has_pending && !s.broken) {
    writing_.Clear();
    writing_.Swap(&s.pending);
    s.has_pending = false;
    s.writing = true;
    StartWrite(&writing_);
    return;
  }
  if (s.final_queued || s.broken) {
    s.finished = true;
    Finish(s.broken ? grpc::Status(grpc::StatusCode::CANCELLED, "the client went away")
                    : s.final_status);
  }
}

void GenerateReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::recursive_mutex> lock(state_->mu);
  state_->writing = false;
  if (!ok && !state_->broken) {
    state_->broken = true;
    core_.Abort(id_);  // frees its pages now; its final output is then dropped
  }
  Pump();
}

void GenerateReactor::OnCancel() {
  if (!id_.empty()) core_.Abort(id_);
  std::lock_guard<std::recursive_mutex> lock(state_->mu);
  state_->broken = true;
  Pump();
}

void GenerateReactor::OnDone() {
  {
    std::lock_guard<std::recursive_mutex> lock(state_->mu);
    state_->reactor = nullptr;
  }
  delete this;
}

}  // namespace m3::engine::server
