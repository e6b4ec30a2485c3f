// An open-addressing hash map from 64-bit keys to small values, used for the BPE merge table:
// merges are looked up once per candidate pair, so this sits on the hottest path of encoding.
#pragma once

#include <cstdint>
#include <vector>

namespace m3::tok {

template <typename V>
class FlatMap64 {
 public:
  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    keys_.assign(cap, kEmpty);
    values_.assign(cap, V{});
    mask_ = cap - 1;
    size_ = 0;
  }
  // Inserts or overwrites; returns false when the key was already there.
  bool Insert(uint64_t key, const V& value) {
    if (keys_.empty() || (size_ + 1) * 2 > keys_.size()) Grow();
    size_t i = Hash(key) & mask_;
    while (keys_[i] != kEmpty) {
      if (keys_[i] == key) {
        values_[i] = value;
        return false;
      }
      i = (i + 1) & mask_;
    }
    keys_[i] = key;
    values_[i] = value;
    ++size_;
    return true;
  }
  const V* Find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    size_t i = Hash(key) & mask_;
    while (true) {
      const uint64_t k = keys_[i];
      if (k == key) return &values_[i];
      if (k == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static size_t Hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  void Grow() {
    std::vector<uint64_t> old_keys;
    std::vector<V> old_values;
    old_keys.swap(keys_);
    old_values.swap(values_);
    Reserve(old_keys.empty() ? 16 : old_keys.size());
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != kEmpty) Insert(old_keys[i], old_values[i]);
    }
  }
  std::vector<uint64_t> keys_;
  std::vector<V> values_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace m3::tok
