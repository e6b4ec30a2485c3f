// Routing over health-checked engines (see engine_router.h).
#include "gateway/engine_client/engine_router.h"

#include <algorithm>
#include <set>

#include "gateway/openai/request_error.h"
#include "shared/error.h"

namespace m3::engine_client {

EngineRouter::EngineRouter(const std::vector<std::string>& addresses, ExpectedModel expected,
                           RouterOptions options)
    : options_(options), policy_(MakeRoutingPolicy(options.routing, options.cache_aware)) {
  Require(!addresses.empty(), ErrorCode::kInvalidArgument, "no engine given (--engine HOST:PORT)");
  Require(options_.max_retries >= 0, ErrorCode::kInvalidArgument,
          "the engine retry bound must not be negative (--engine-retries)");
  std::set<std::string> seen;
  for (const std::string& a : addresses) {
    Require(!a.empty(), ErrorCode::kInvalidArgument, "an engine address is empty");
    Require(seen.insert(a).second, ErrorCode::kInvalidArgument,
            "the engine " + a + " is given twice");
    endpoints_.push_back(std::make_shared<EngineEndpoint>(a, expected, options_.endpoint));
  }
}

EngineRouter::~EngineRouter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  // A call's on_done may retry on another engine: Pick refuses from here on, so after each
  // engine's calls are drained no new one can start.
  closing_.store(true);
  for (const auto& e : endpoints_) e->CancelCalls();
}

size_t EngineRouter::Start() {
  for (const auto& e : endpoints_) {
    if (e->Connect() == EndpointState::kIncompatible) {
      throw Error(ErrorCode::kInvalidArgument, e->last_error());
    }
  }
  if (!monitor_.joinable()) monitor_ = std::thread([this] { Monitor(); });
  return healthy_count();
}

void EngineRouter::ProbeAll() {
  for (const auto& e : endpoints_) e->Probe();
}

void EngineRouter::Monitor() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, options_.health_interval, [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    ProbeAll();  // each probe is bounded by the probe timeout
    lock.lock();
  }
}

size_t EngineRouter::healthy_count() const {
  size_t n = 0;
  for (const auto& e : endpoints_) n += e->healthy() ? 1 : 0;
  return n;
}

std::shared_ptr<EngineEndpoint> EngineRouter::Pick(std::span<const EngineEndpoint* const> exclude,
                                                   std::span<const int32_t> prompt) const {
  if (closing_.load()) {
    throw openai::RequestError(ErrorCode::kUnavailable, "the gateway is shutting down", "",
                               "no_engine_available");
  }
  std::vector<EngineLoad> candidates;
  candidates.reserve(endpoints_.size());
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const auto& e = endpoints_[i];
    if (!e->healthy() || std::find(exclude.begin(), exclude.end(), e.get()) != exclude.end()) {
      continue;
    }
    candidates.push_back({i, e->outstanding()});
  }
  std::shared_ptr<EngineEndpoint> best;
  if (!candidates.empty()) best = endpoints_.at(policy_->Choose(candidates, prompt));
  if (!best) {
    std::string why;
    for (const auto& e : endpoints_) {
      why += (why.empty() ? "" : "; ") + e->address() + " " +
             std::string(EndpointStateName(e->state()));
      if (!e->last_error().empty()) why += " (" + e->last_error() + ")";
    }
    throw openai::RequestError(ErrorCode::kUnavailable, "no engine can serve the request: " + why,
                               "", "no_engine_available");
  }
  return best;
}

}  // namespace m3::engine_client
