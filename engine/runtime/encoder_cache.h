// EncoderCache: encoded image / video segments (ModelRunner::Encode outputs) by content hash,
// shared across requests, bounded in bytes with least-recently-used eviction. An evicted entry
// stays alive while a sequence still holds it (shared_ptr), so eviction never breaks a prefill.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <utility>

#include "engine/step/model_runner.h"

namespace m3::engine {

class EncoderCache {
 public:
  explicit EncoderCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  std::shared_ptr<const EncoderOutput> Find(uint64_t key);  // null on a miss; marks it used
  // Keeps `output` unless it alone exceeds the budget; evicts the least recently used.
  void Insert(uint64_t key, std::shared_ptr<const EncoderOutput> output);

  int64_t bytes() const { return bytes_; }
  int64_t entries() const { return static_cast<int64_t>(map_.size()); }
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  using Entry = std::pair<uint64_t, std::shared_ptr<const EncoderOutput>>;
  int64_t max_bytes_;
  int64_t bytes_ = 0;
  int64_t hits_ = 0, misses_ = 0;
  std::list<Entry> lru_;  // front: most recent
  std::unordered_map<uint64_t, std::list<Entry>::iterator> map_;
};

}  // namespace m3::engine
