// Releasing a checkpoint's mmapped source pages once their tensors are on the backend, at once
// (one uploader) or when the last rank of a parallel group has read its slice.
#pragma once

#include <mutex>
#include <unordered_map>

#include "shared/tensor.h"

namespace m3::engine::backend {

// The ranks of a parallel group read slices of the same mapped tensors: a tensor's source pages
// are dropped once every one of `readers` uploaders has taken its slice, so the group's resident
// memory stays near what the ranks converted, as with one uploader.
class SharedPageRelease {
 public:
  explicit SharedPageRelease(int readers) : readers_(readers) {}
  // One reader is done with `view`'s tensor; the last of `readers` (0: all) releases its pages.
  void Read(const TensorView& view, int readers = 0);

 private:
  int readers_;
  std::mutex mu_;
  std::unordered_map<const uint8_t*, int> reads_;
};

// Drops the mapped source pages that lie wholly inside `view`.
void ReleasePages(const TensorView& view);

}  // namespace m3::engine::backend
