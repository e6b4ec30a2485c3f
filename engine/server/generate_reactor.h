// GenerateReactor: one Generate stream. The engine thread pushes outputs through a shared
// StreamState (which outlives the reactor, so a late output after the client left is dropped
// safely); gRPC's callback threads drive the writes. Exactly one Finish per stream.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "engine.grpc.pb.h"
#include "engine/runtime/engine_core.h"
#include "engine/server/structured_output.h"

namespace m3::engine::server {

class GenerateReactor : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Starts the request; on a refusal (bad input, full queue, shutting down) finishes the RPC
  // with the matching status at once.
  GenerateReactor(EngineCore& core, const v1::GenerateRequest& request,
                  const StructuredOutputCompiler* structured = nullptr);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct State {
    std::recursive_mutex mu;             // a write completion may run inline on the pushing thread
    GenerateReactor* reactor = nullptr;  // null once gRPC is done with the stream
    v1::GenerateResponse pending;        // merged outputs not yet written
    bool has_pending = false;
    bool writing = false;
    bool final_queued = false;  // the last output is in pending (or being written)
    bool finished = false;      // Finish called
    bool broken = false;        // a write failed: the client is gone
    grpc::Status final_status;
  };
  static void Push(const std::shared_ptr<State>& state, RequestOutput&& out);
  // With state->mu held: starts the next write or finishes when all is written.
  void Pump();

  EngineCore& core_;
  std::string id_;
  std::shared_ptr<State> state_;
  v1::GenerateResponse writing_;  // the message of the write in flight
};

}  // namespace m3::engine::server
