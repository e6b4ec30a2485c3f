// EngineRouter: the gateway's engines (`--engine HOST:PORT`, one or more): checks each one's
// ModelInfo against the model directory at start, probes their health periodically from one
// monitor thread (short unary calls with a deadline, one engine after another; ejecting and
// re-admitting), and picks a healthy engine for each new request by the configured routing
// policy (least outstanding requests, round-robin or cache-aware: routing_policy.h); none
// healthy is a 503.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gateway/engine_client/engine_endpoint.h"
#include "gateway/engine_client/expected_model.h"
#include "gateway/engine_client/generation_registry.h"
#include "gateway/engine_client/routing_policy.h"

namespace m3::engine_client {

struct RouterOptions {
  EndpointOptions endpoint;
  std::chrono::milliseconds health_interval{1000};
  RoutingPolicyKind routing = RoutingPolicyKind::kLeastLoad;
  CacheAwareOptions cache_aware;  // for RoutingPolicyKind::kCacheAware
  // Further engines a request is tried on after its engine died under it (before anything
  // reached the client); each engine at most once per request. 0: no retry.
  int max_retries = 2;
};

class EngineRouter {
 public:
  // Throws m3::Error(kInvalidArgument) for no addresses or a duplicate.
  EngineRouter(const std::vector<std::string>& addresses, ExpectedModel expected,
               RouterOptions options = {});
  // Stops the monitor, refuses new requests (503), cancels the calls in flight and waits for
  // them to end, so no gRPC callback runs after it (nor drops a channel on a gRPC thread).
  ~EngineRouter();
  EngineRouter(const EngineRouter&) = delete;
  EngineRouter& operator=(const EngineRouter&) = delete;

  // Connects to every engine (ModelInfo, blocking, each within the probe timeout) and starts
  // the health monitor. Throws m3::Error(kInvalidArgument) naming the engine when one serves
  // another model; unreachable engines are tolerated (the monitor admits them when they
  // answer). Returns how many engines are healthy.
  size_t Start();

  // A healthy engine chosen by the routing policy among those not in `exclude` (the engines
  // already tried for this request). `prompt`: the request's token ids (the cache-aware
  // policy's key; the others ignore it). Throws openai::RequestError(kUnavailable -> 503,
  // "no_engine_available") when none can serve.
  std::shared_ptr<EngineEndpoint> Pick(std::span<const EngineEndpoint* const> exclude = {},
                                       std::span<const int32_t> prompt = {}) const;
  RoutingPolicyKind routing() const { return options_.routing; }
  int max_retries() const { return options_.max_retries; }

  const std::vector<std::shared_ptr<EngineEndpoint>>& endpoints() const { return endpoints_; }
  size_t healthy_count() const;

  // The generations running on these engines (GenerationSession registers its own).
  GenerationRegistry& generations() { return generations_; }

  // Probes every engine now (the monitor's step; tests call it to avoid waiting).
  void ProbeAll();

 private:
  void Monitor();

  std::vector<std::shared_ptr<EngineEndpoint>> endpoints_;
  RouterOptions options_;
  std::unique_ptr<RoutingPolicy> policy_;
  GenerationRegistry generations_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> closing_{false};
  std::thread monitor_;
};

}  // namespace m3::engine_client
