// RoutingPolicy: which of the eligible engines (healthy, not yet tried for this request) takes
// a new request, from a snapshot of their outstanding-request counts and the request's prompt
// token ids. Three policies: least outstanding requests (the default), round-robin, and
// cache-aware, which sends a prompt to the engine that last served the longest run of its
// leading token blocks (so the engine's prefix cache can reuse the KV pages) unless that
// engine is much busier than the least-loaded one. The policies see no gRPC: they are pure
// decisions over the snapshot (plus their own memory), testable on their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace m3::engine_client {

enum class RoutingPolicyKind { kLeastLoad, kRoundRobin, kCacheAware };

// "least-load", "round-robin", "cache-aware" (the --routing flag's spellings); nullopt for
// anything else.
std::optional<RoutingPolicyKind> ParseRoutingPolicy(std::string_view name);
std::string_view RoutingPolicyName(RoutingPolicyKind kind);

struct CacheAwareOptions {
  // Tokens per hashed block. A prefix is matched in whole blocks only, so this trades match
  // granularity against table size; a multiple of the engine's KV page size keeps matches
  // aligned with what the engine can reuse.
  int block_tokens = 64;
  // Prefix blocks remembered (least recently used dropped first): bounds the table at roughly
  // 100 bytes per entry.
  size_t max_blocks = size_t{1} << 16;
  // The affine engine is passed over when its outstanding count exceeds
  // imbalance_factor * least + imbalance_slack (the least-loaded eligible engine's count).
  double imbalance_factor = 2.0;
  int imbalance_slack = 4;
};

// One eligible engine: `id` is its position in the router's list (stable for the router's
// life), `outstanding` its requests in flight when the snapshot was taken.
struct EngineLoad {
  size_t id = 0;
  int outstanding = 0;
};

class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  // `candidates`: non-empty, in the router's order. Returns the chosen candidate's id. Safe to
  // call from several threads at once.
  virtual size_t Choose(std::span<const EngineLoad> candidates,
                        std::span<const int32_t> prompt) = 0;
};

// Throws m3::Error(kInvalidArgument) for cache-aware options out of range (block_tokens < 1,
// max_blocks < 1, imbalance_factor < 1, imbalance_slack < 0).
std::unique_ptr<RoutingPolicy> MakeRoutingPolicy(RoutingPolicyKind kind,
                                                 const CacheAwareOptions& cache_aware = {});

// The fewest outstanding requests; ties go to the earliest listed.
class LeastLoadPolicy final : public RoutingPolicy {
 public:
  size_t Choose(std::span<const EngineLoad> candidates, std::span<const int32_t> prompt) override;
};

// Each engine in turn: the first candidate at or after the one following the last chosen,
// wrapping, so an ejected engine is skipped without disturbing the others' order.
class RoundRobinPolicy final : public RoutingPolicy {
 public:
  size_t Choose(std::span<const EngineLoad> candidates, std::span<const int32_t> prompt) override;

 private:
  std::mutex mu_;
  size_t next_ = 0;
};

class CacheAwarePolicy final : public RoutingPolicy {
 public:
  explicit CacheAwarePolicy(const CacheAwareOptions& options);
  size_t Choose(std::span<const EngineLoad> candidates, std::span<const int32_t> prompt) override;

  // The chained hashes of the prompt's whole leading blocks: entry i covers tokens
  // [0, (i + 1) * block_tokens), so equal entries mean equal prefixes (up to 64-bit collisions).
  static std::vector<uint64_t> PrefixHashes(std::span<const int32_t> prompt, int block_tokens);
  size_t remembered_blocks() const;

 private:
  struct Entry {
    uint64_t hash;
    size_t id;
  };
  // Marks every block of `hashes` as last served by `id`, most recent first.
  void Remember(const std::vector<uint64_t>& hashes, size_t id);

  CacheAwareOptions options_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used at the front
  std::unordered_map<uint64_t, std::list<Entry>::iterator> table_;
};

}  // namespace m3::engine_client
