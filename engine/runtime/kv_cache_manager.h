// KvCacheManager: who owns which page of the paged KV storage (the storage itself lives in the
// ModelRunner). A fixed pool of pages; each sequence has one block table (page j holds its
// positions [j * page_size, (j + 1) * page_size) for K, V and the MSA index keys alike).
// Prefix caching: a full, computed page is registered under the hash of its contents' chain
// (hash of the previous page's chain value and the page's token keys), so a later sequence with
// the same prefix takes the page instead of recomputing it. Pages are reference counted; a
// registered page nobody uses stays cached and is evicted least recently used first when the
// pool runs short.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace m3::engine {

class KvCacheManager {
 public:
  KvCacheManager(int64_t num_pages, int64_t page_size, bool prefix_caching = true);

  int64_t num_pages() const { return num_pages_; }
  int64_t page_size() const { return page_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Pages a new allocation can take: never used, or cached and unreferenced (evictable).
  int64_t num_free_pages() const;
  int64_t num_used_pages() const { return num_pages_ - num_free_pages(); }  // referenced
  int64_t num_cached_pages() const { return static_cast<int64_t>(hash_to_page_.size()); }
  double usage() const;  // referenced pages / all pages
  int64_t PagesFor(int64_t tokens) const { return (tokens + page_size_ - 1) / page_size_; }

  // Takes the longest run of leading pages found in the prefix cache, given the chain hashes
  // of a sequence's full pages in order; appends them to the (empty) table and returns how
  // many were taken. Each taken page gains a reference.
  int64_t AcquireCachedPrefix(const std::vector<uint64_t>& page_hashes,
                              std::vector<int32_t>& table);
  // Grows `table` until it covers `tokens` positions. All or nothing: returns false, leaving
  // the table as it was, when the pool has too few free pages.
  bool Allocate(std::vector<int32_t>& table, int64_t tokens);
  // Registers a computed full page under its chain hash (first writer wins: a page whose hash
  // is already registered elsewhere simply stays private).
  void Register(int32_t page, uint64_t chain_hash);
  // Gives back the pages of `table` beyond those covering `tokens` positions (speculative
  // decoding's rejected drafts), tail first. Never a registered page: those hold computed
  // positions, which a caller keeps.
  void Truncate(std::vector<int32_t>& table, int64_t tokens);
  // Drops the sequence's references (the table is cleared). Tail pages are queued for
  // eviction before head pages, since a shared prefix is more likely to be asked for again.
  void Free(std::vector<int32_t>& table);

  // Drops every cached, unreferenced page from the prefix cache (tests, reconfiguration).
  void ResetPrefixCache();

 private:
  struct Page {
    int32_t refs = 0;
    bool hashed = false;
    uint64_t hash = 0;
    std::list<int32_t>::iterator lru;  // valid when cached and unreferenced
  };
  int32_t TakeFreePage();
  void Unregister(int32_t page);

  int64_t num_pages_, page_size_;
  bool prefix_caching_;
  std::vector<Page> pages_;
  std::vector<int32_t> free_;     // unreferenced, not cached
  std::list<int32_t> evictable_;  // unreferenced, cached; front = evicted first
  std::unordered_map<uint64_t, int32_t> hash_to_page_;
};

}  // namespace m3::engine
