// EncoderCache: LRU over encoded segments, accounted by EncoderOutput::bytes().
#include "engine/runtime/encoder_cache.h"

namespace m3::engine {

std::shared_ptr<const EncoderOutput> EncoderCache::Find(uint64_t key) {
  auto it = map_.find(key);
  if (it == map_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void EncoderCache::Insert(uint64_t key, std::shared_ptr<const EncoderOutput> output) {
  if (!output || map_.count(key)) return;
  const int64_t size = output->bytes();
  if (size > max_bytes_) return;
  while (bytes_ + size > max_bytes_ && !lru_.empty()) {
    bytes_ -= lru_.back().second->bytes();
    map_.erase(lru_.back().first);
    lru_.pop_back();
  }
  lru_.emplace_front(key, std::move(output));
  map_[key] = lru_.begin();
  bytes_ += size;
}

}  // namespace m3::engine
