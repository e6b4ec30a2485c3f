// Least-load, round-robin and cache-aware engine choice (see routing_policy.h).
#include "gateway/engine_client/routing_policy.h"

#include <algorithm>

#include "shared/error.h"

namespace m3::engine_client {

namespace {

// A 64-bit finalizer: every input bit affects every output bit, so a chain of blocks stays
// well spread and a one-token difference changes the hash of its block and all after it.
uint64_t Mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ULL;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dULL;
  x ^= x >> 33;
  return x;
}

size_t LeastLoaded(std::span<const EngineLoad> candidates) {
  const EngineLoad* best = &candidates[0];
  for (const EngineLoad& c : candidates) {
    if (c.outstanding < best->outstanding) best = &c;
  }
  return best->id;
}

}  // namespace

std::optional<RoutingPolicyKind> ParseRoutingPolicy(std::string_view name) {
  if (name == "least-load") return RoutingPolicyKind::kLeastLoad;
  if (name == "round-robin") return RoutingPolicyKind::kRoundRobin;
  if (name == "cache-aware") return RoutingPolicyKind::kCacheAware;
  return std::nullopt;
}

std::string_view RoutingPolicyName(RoutingPolicyKind kind) {
  switch (kind) {
    case RoutingPolicyKind::kLeastLoad:
      return "least-load";
    case RoutingPolicyKind::kRoundRobin:
      return "round-robin";
    case RoutingPolicyKind::kCacheAware:
      return "cache-aware";
  }
  return "least-load";
}

std::unique_ptr<RoutingPolicy> MakeRoutingPolicy(RoutingPolicyKind kind,
                                                 const CacheAwareOptions& cache_aware) {
  switch (kind) {
    case RoutingPolicyKind::kRoundRobin:
      return std::make_unique<RoundRobinPolicy>();
    case RoutingPolicyKind::kCacheAware:
      return std::make_unique<CacheAwarePolicy>(cache_aware);
    case RoutingPolicyKind::kLeastLoad:
      break;
  }
  return std::make_unique<LeastLoadPolicy>();
}

size_t LeastLoadPolicy::Choose(std::span<const EngineLoad> candidates, std::span<const int32_t>) {
  return LeastLoaded(candidates);
}

size_t RoundRobinPolicy::Choose(std::span<const EngineLoad> candidates, std::span<const int32_t>) {
  std::lock_guard<std::mutex> lock(mu_);
  // Candidates come in id order: the first at or after the cursor, else wrap to the first.
  const EngineLoad* chosen = &candidates[0];
  for (const EngineLoad& c : candidates) {
    if (c.id >= next_) {
      chosen = &c;
      break;
    }
  }
  next_ = chosen->id + 1;
  return chosen->id;
}

CacheAwarePolicy::CacheAwarePolicy(const CacheAwareOptions& options) : options_(options) {
  Require(options_.block_tokens >= 1, ErrorCode::kInvalidArgument,
          "cache-aware routing: the block size must be at least one token");
  Require(options_.max_blocks >= 1, ErrorCode::kInvalidArgument,
          "cache-aware routing: the prefix table must hold at least one block");
  Require(options_.imbalance_factor >= 1, ErrorCode::kInvalidArgument,
          "cache-aware routing: the imbalance factor must be at least 1");
  Require(options_.imbalance_slack >= 0, ErrorCode::kInvalidArgument,
          "cache-aware routing: the imbalance slack must not be negative");
}

std::vector<uint64_t> CacheAwarePolicy::PrefixHashes(std::span<const int32_t> prompt,
                                                     int block_tokens) {
  const size_t block = static_cast<size_t>(block_tokens);
  std::vector<uint64_t> out;
  out.reserve(prompt.size() / block);
  uint64_t h = Mix(0x6d3a9f17c2b5e481ULL ^ block);  // the block size is part of the domain
  for (size_t end = block; end <= prompt.size(); end += block) {
    for (size_t i = end - block; i < end; ++i) {
      h = Mix(h ^
              (static_cast<uint64_t>(static_cast<uint32_t>(prompt[i])) + 0x9e3779b97f4a7c15ULL));
    }
    out.push_back(h);
  }
  return out;
}

size_t CacheAwarePolicy::remembered_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.size();
}

void CacheAwarePolicy::Remember(const std::vector<uint64_t>& hashes, size_t id) {
  // Deepest block first, so the shortest prefixes (a shared system prompt) end up the most
  // recently used and are the last to be dropped.
  for (auto it = hashes.rbegin(); it != hashes.rend(); ++it) {
    auto found = table_.find(*it);
    if (found != table_.end()) {
      found->second->id = id;
      lru_.splice(lru_.begin(), lru_, found->second);
      continue;
    }
    lru_.push_front({*it, id});
    table_.emplace(*it, lru_.begin());
    if (table_.size() > options_.max_blocks) {
      table_.erase(lru_.back().hash);
      lru_.pop_back();
    }
  }
}

size_t CacheAwarePolicy::Choose(std::span<const EngineLoad> candidates,
                                std::span<const int32_t> prompt) {
  const std::vector<uint64_t> hashes = PrefixHashes(prompt, options_.block_tokens);
  int least = candidates[0].outstanding;
  for (const EngineLoad& c : candidates) least = std::min(least, c.outstanding);
  const double limit = options_.imbalance_factor * least + options_.imbalance_slack;

  std::lock_guard<std::mutex> lock(mu_);
  std::optional<size_t> chosen;
  // The longest remembered prefix whose engine can take the request and is not too busy (a
  // prefix is not worth a long queue; a shorter one may be on an idler engine).
  for (auto it = hashes.rbegin(); it != hashes.rend() && !chosen; ++it) {
    auto found = table_.find(*it);
    if (found == table_.end()) continue;
    const size_t id = found->second->id;
    for (const EngineLoad& c : candidates) {
      if (c.id == id && c.outstanding <= limit) chosen = id;
    }
  }
  if (!chosen) chosen = LeastLoaded(candidates);
  Remember(hashes, *chosen);
  return *chosen;
}

}  // namespace m3::engine_client
