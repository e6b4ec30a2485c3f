// KvCacheManager: allocation all-or-nothing, reference counts, prefix-cache hits by chain hash,
// LRU eviction of cached free pages (tail pages first).
#include <doctest/doctest.h>

#include "engine/runtime/kv_cache_manager.h"
#include "shared/error.h"

namespace m3::engine {
namespace {

TEST_CASE("allocation covers tokens, is all or nothing, and frees everything") {
  KvCacheManager kv(8, 4);
  std::vector<int32_t> a, b;
  CHECK(kv.Allocate(a, 9));  // 3 pages
  CHECK(a.size() == 3);
  CHECK(kv.Allocate(a, 12));  // still 3
  CHECK(a.size() == 3);
  CHECK(kv.num_free_pages() == 5);
  CHECK_FALSE(kv.Allocate(b, 24));  // 6 pages > 5 free
  CHECK(b.empty());
  CHECK(kv.num_free_pages() == 5);
  CHECK(kv.Allocate(b, 20));
  CHECK(kv.num_free_pages() == 0);
  CHECK(kv.usage() == doctest::Approx(1.0));
  kv.Free(a);
  kv.Free(b);
  CHECK(a.empty());
  CHECK(kv.num_free_pages() == 8);
  CHECK(kv.num_used_pages() == 0);
  CHECK_THROWS_AS(KvCacheManager(0, 4), Error);
}

TEST_CASE("registered pages are shared by reference and survive their owner as cache") {
  KvCacheManager kv(6, 2);
  std::vector<int32_t> a;
  REQUIRE(kv.Allocate(a, 6));
  kv.Register(a[0], 100);
  kv.Register(a[1], 101);
  // A second sequence with the same first two pages takes them while the first still runs.
  std::vector<int32_t> b;
  CHECK(kv.AcquireCachedPrefix({100, 101, 102}, b) == 2);
  CHECK(b == std::vector<int32_t>{a[0], a[1]});
  CHECK(kv.num_used_pages() == 3);
  kv.Free(a);
  CHECK(kv.num_used_pages() == 2);  // b still holds the shared two
  kv.Free(b);
  CHECK(kv.num_used_pages() == 0);
  CHECK(kv.num_cached_pages() == 2);
  // Cached and free: a new lookup finds them again.
  std::vector<int32_t> c;
  CHECK(kv.AcquireCachedPrefix({100, 101}, c) == 2);
  // A different first page breaks the chain at once.
  std::vector<int32_t> d;
  CHECK(kv.AcquireCachedPrefix({999, 101}, d) == 0);
  kv.Free(c);
  // First writer wins: registering another page under a known hash keeps the old mapping.
  std::vector<int32_t> e;
  REQUIRE(kv.Allocate(e, 2));
  kv.Register(e[0], 100);
  kv.Free(e);
  std::vector<int32_t> f;
  CHECK(kv.AcquireCachedPrefix({100}, f) == 1);
  CHECK(f[0] >= 0);
  kv.Free(f);
}

TEST_CASE("eviction takes never-used pages first, then cached pages least recently freed") {
  KvCacheManager kv(4, 1);
  std::vector<int32_t> a, b;
  REQUIRE(kv.Allocate(a, 2));
  kv.Register(a[0], 1);
  kv.Register(a[1], 2);
  REQUIRE(kv.Allocate(b, 2));
  kv.Register(b[0], 3);
  kv.Register(b[1], 4);
  kv.Free(a);  // queued tail first: 2 then 1
  kv.Free(b);  // then 4, 3
  CHECK(kv.num_free_pages() == 4);
  std::vector<int32_t> c;
  REQUIRE(kv.Allocate(c, 1));  // evicts hash 2 (a's tail)
  std::vector<int32_t> probe;
  CHECK(kv.AcquireCachedPrefix({1}, probe) == 1);  // a's head survived
  kv.Free(probe);
  std::vector<int32_t> probe2;
  CHECK(kv.AcquireCachedPrefix({1, 2}, probe2) == 1);  // 2 is gone
  kv.Free(probe2);
  // Using hash 1 again made it recent: next evictions take 4 and 3 before it.
  std::vector<int32_t> d;
  REQUIRE(kv.Allocate(d, 2));
  std::vector<int32_t> probe3;
  CHECK(kv.AcquireCachedPrefix({1}, probe3) == 1);
  std::vector<int32_t> probe4;
  CHECK(kv.AcquireCachedPrefix({3}, probe4) == 0);
  kv.Free(probe3);
  kv.Free(c);
  kv.Free(d);
  kv.ResetPrefixCache();
  CHECK(kv.num_cached_pages() == 0);
  CHECK(kv.num_free_pages() == 4);
}

TEST_CASE("prefix caching off: nothing is registered or found") {
  KvCacheManager kv(4, 2, false);
  std::vector<int32_t> a;
  REQUIRE(kv.Allocate(a, 4));
  kv.Register(a[0], 7);
  kv.Free(a);
  std::vector<int32_t> b;
  CHECK(kv.AcquireCachedPrefix({7}, b) == 0);
  CHECK(kv.num_cached_pages() == 0);
}

}  // namespace
}  // namespace m3::engine
