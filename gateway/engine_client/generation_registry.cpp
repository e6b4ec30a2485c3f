// The running generations of a router (see generation_registry.h).
#include "gateway/engine_client/generation_registry.h"

#include <vector>

#include "gateway/engine_client/generation_session.h"

namespace m3::engine_client {

void GenerationRegistry::Add(const std::shared_ptr<GenerationSession>& session) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.emplace(session.get(), session);
}

void GenerationRegistry::Remove(const GenerationSession* session) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(session);
}

size_t GenerationRegistry::AbortAll(const std::string& message) {
  std::vector<std::shared_ptr<GenerationSession>> running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& entry : sessions_) {
      if (auto s = entry.second.lock()) running.push_back(std::move(s));
    }
  }
  // Outside the lock: an aborted session removes itself.
  size_t ended = 0;
  for (const auto& s : running) {
    ended += s->Abort({GenerationErrorKind::kShuttingDown, message}) ? 1 : 0;
  }
  return ended;
}

size_t GenerationRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace m3::engine_client
