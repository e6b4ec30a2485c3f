// KvCacheManager: page pool, reference counts, prefix-cache registration and LRU eviction.
#include "engine/runtime/kv_cache_manager.h"

#include <string>

#include "shared/error.h"

namespace m3::engine {

KvCacheManager::KvCacheManager(int64_t num_pages, int64_t page_size, bool prefix_caching)
    : num_pages_(num_pages), page_size_(page_size), prefix_caching_(prefix_caching) {
  Require(num_pages > 0 && num_pages < (int64_t{1} << 31), ErrorCode::kInvalidArgument,
          "the KV cache needs between 1 and 2^31 pages, got " + std::to_string(num_pages));
  Require(page_size > 0, ErrorCode::kInvalidArgument,
          "KV page size must be positive, got " + std::to_string(page_size));
  pages_.resize(static_cast<size_t>(num_pages));
  free_.reserve(static_cast<size_t>(num_pages));
  // Popped from the back: page 0 is handed out first (easier to read in tests and dumps).
  for (int64_t p = num_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

int64_t KvCacheManager::num_free_pages() const {
  return static_cast<int64_t>(free_.size() + evictable_.size());
}

double KvCacheManager::usage() const {
  return static_cast<double>(num_used_pages()) / static_cast<double>(num_pages_);
}

int32_t KvCacheManager::TakeFreePage() {
  int32_t p;
  if (!free_.empty()) {
    p = free_.back();
    free_.pop_back();
  } else {
    Require(!evictable_.empty(), ErrorCode::kInternal, "KV page pool exhausted");
    p = evictable_.front();
    evictable_.pop_front();
    Unregister(p);
  }
  pages_[p].refs = 1;
  return p;
}

void KvCacheManager::Unregister(int32_t page) {
  Page& pg = pages_[page];
  if (!pg.hashed) return;
  auto it = hash_to_page_.find(pg.hash);
  if (it != hash_to_page_.end() && it->second == page) hash_to_page_.erase(it);
  pg.hashed = false;
}

int64_t KvCacheManager::AcquireCachedPrefix(const std::vector<uint64_t>& page_hashes,
                                            std::vector<int32_t>& table) {
  Require(table.empty(), ErrorCode::kInternal, "prefix lookup on a non-empty block table");
  if (!prefix_caching_) return 0;
  for (uint64_t h : page_hashes) {
    auto it = hash_to_page_.find(h);
    if (it == hash_to_page_.end()) break;
    Page& pg = pages_[it->second];
    if (pg.refs == 0) evictable_.erase(pg.lru);
    ++pg.refs;
    table.push_back(it->second);
  }
  return static_cast<int64_t>(table.size());
}

bool KvCacheManager::Allocate(std::vector<int32_t>& table, int64_t tokens) {
  const int64_t need = PagesFor(tokens) - static_cast<int64_t>(table.size());
  if (need <= 0) return true;
  if (need > num_free_pages()) return false;
  for (int64_t i = 0; i < need; ++i) table.push_back(TakeFreePage());
  return true;
}

void KvCacheManager::Register(int32_t page, uint64_t chain_hash) {
  if (!prefix_caching_) return;
  Page& pg = pages_[page];
  if (pg.hashed) return;
  if (!hash_to_page_.emplace(chain_hash, page).second) return;
  pg.hashed = true;
  pg.hash = chain_hash;
}

void KvCacheManager::Free(std::vector<int32_t>& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    Page& pg = pages_[*it];
    Require(pg.refs > 0, ErrorCode::kInternal, "KV page freed twice");
    if (--pg.refs > 0) continue;
    if (pg.hashed) {
      pg.lru = evictable_.insert(evictable_.end(), *it);
    } else {
      free_.push_back(*it);
    }
  }
  table.clear();
}

void KvCacheManager::Truncate(std::vector<int32_t>& table, int64_t tokens) {
  const size_t keep = static_cast<size_t>(PagesFor(tokens));
  if (table.size() <= keep) return;
  std::vector<int32_t> tail(table.begin() + static_cast<std::ptrdiff_t>(keep), table.end());
  table.resize(keep);
  Free(tail);
}

void KvCacheManager::ResetPrefixCache() {
  for (int32_t p : evictable_) {
    Unregister(p);
    free_.push_back(p);
  }
  evictable_.clear();
}

}  // namespace m3::engine
