// GenerationRegistry: the generations running on a router's engines, so that the gateway's
// shutdown can end the ones still going when its grace period is over with a proper error
// (the client's stream gets an error event and its end) instead of a bare close.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace m3::engine_client {

class GenerationSession;

class GenerationRegistry {
 public:
  void Add(const std::shared_ptr<GenerationSession>& session);
  void Remove(const GenerationSession* session);  // the session has told its observer the end
  // Ends every running generation with a GenerationError of kind kShuttingDown and `message`,
  // and cancels its engine request. Returns how many were ended.
  size_t AbortAll(const std::string& message);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<const GenerationSession*, std::weak_ptr<GenerationSession>> sessions_;
};

}  // namespace m3::engine_client
