// A bounded, thread-safe cache of BPE results per pre-token. Natural text repeats words a lot,
// so most pre-tokens skip the merge loop entirely. Sharded so concurrent encoders rarely meet
// on one lock; each shard is an open-addressing table whose keys and ids live in one flat
// arena (no per-entry allocation, one or two cache lines per lookup). A full shard is simply
// emptied, which keeps memory bounded and adapts to new text.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

namespace m3::tok {

class WordCache {
 public:
  static constexpr size_t kMaxKeyBytes = 256;  // longer pre-tokens are not worth keeping

  WordCache() = default;
  WordCache(const WordCache&) = delete;
  WordCache& operator=(const WordCache&) = delete;

  static uint64_t HashOf(std::string_view key) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (key.size() * 0xC2B2AE3D27D4EB4Full);
    const char* p = key.data();
    size_t n = key.size();
    while (n >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      h = Mix(h ^ w);
      p += 8;
      n -= 8;
    }
    if (n > 0) {
      uint64_t w = 0;
      std::memcpy(&w, p, n);
      h = Mix(h ^ w);
    }
    return h | 1;  // 0 marks an empty slot
  }

  // Appends the cached ids of `key` to `out`; false on a miss.
  bool Lookup(std::string_view key, uint64_t hash, std::vector<int32_t>& out) const {
    Shard& s = shards_[hash & (kShards - 1)];
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.slots.empty()) return false;
    for (size_t i = (hash >> 8) & kSlotMask;; i = (i + 1) & kSlotMask) {
      const Slot& slot = s.slots[i];
      if (slot.hash == 0) return false;
      if (slot.hash == hash && slot.key_len == key.size() && KeyEquals(s, slot, key)) {
        const int32_t* ids = s.arena.data() + slot.offset;
        out.insert(out.end(), ids, ids + slot.n_ids);
        return true;
      }
    }
  }

  void Insert(std::string_view key, uint64_t hash, std::span<const int32_t> ids) const {
    if (key.size() > kMaxKeyBytes || ids.size() > 0xFFFF) return;
    Shard& s = shards_[hash & (kShards - 1)];
    std::lock_guard<std::mutex> lock(s.mu);
    const size_t need = ids.size() + (key.size() + 3) / 4;
    if (s.slots.empty() || s.count >= kMaxEntries || s.arena.size() + need > kArenaWords) {
      s.slots.assign(kSlots, Slot{});
      s.arena.clear();
      s.arena.reserve(kArenaWords);
      s.count = 0;
    }
    size_t i = (hash >> 8) & kSlotMask;
    for (; s.slots[i].hash != 0; i = (i + 1) & kSlotMask) {
      const Slot& slot = s.slots[i];
      if (slot.hash == hash && slot.key_len == key.size() && KeyEquals(s, slot, key)) {
        return;  // another thread got here first
      }
    }
    Slot& slot = s.slots[i];
    slot.hash = hash;
    slot.offset = static_cast<uint32_t>(s.arena.size());
    slot.key_len = static_cast<uint16_t>(key.size());
    slot.n_ids = static_cast<uint16_t>(ids.size());
    s.arena.insert(s.arena.end(), ids.begin(), ids.end());
    const size_t key_at = s.arena.size();
    s.arena.resize(key_at + (key.size() + 3) / 4, 0);
    std::memcpy(s.arena.data() + key_at, key.data(), key.size());
    ++s.count;
  }

 private:
  static uint64_t Mix(uint64_t x) {
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 32;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 29;
    return x;
  }
  static constexpr size_t kShards = 16;
  static constexpr size_t kSlots = 8192;  // per shard; at most half full
  static constexpr size_t kSlotMask = kSlots - 1;
  static constexpr size_t kMaxEntries = kSlots / 2;
  static constexpr size_t kArenaWords = 128 * 1024;
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;
    uint16_t key_len = 0;
    uint16_t n_ids = 0;
  };
  struct Shard {
    std::mutex mu;
    std::vector<Slot> slots;
    std::vector<int32_t> arena;  // per entry: its ids, then its key bytes padded to words
    size_t count = 0;
  };
  static bool KeyEquals(const Shard& s, const Slot& slot, std::string_view key) {
    const auto* stored = reinterpret_cast<const char*>(s.arena.data() + slot.offset + slot.n_ids);
    return std::memcmp(stored, key.data(), key.size()) == 0;
  }
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace m3::tok
