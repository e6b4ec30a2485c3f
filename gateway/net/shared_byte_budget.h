// SharedByteBudget: the media bytes one request may still take when its items are fetched at
// the same time. Each fetch charges what it takes as it arrives (a declared Content-Length at
// once, a body of unknown length as it streams), so the request's media together never pass
// the limit however many fetches run; thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "shared/error.h"

namespace m3::net {

class SharedByteBudget {
 public:
  explicit SharedByteBudget(int64_t total) : total_(total), remaining_(total) {}

  int64_t total() const { return total_; }
  int64_t remaining() const { return remaining_.load(std::memory_order_relaxed); }

  // Takes `bytes`, or throws kTooLarge naming `what` (nothing is taken then).
  void Charge(int64_t bytes, const std::string& what) {
    int64_t left = remaining_.load(std::memory_order_relaxed);
    do {
      if (bytes > left) {
        throw Error(ErrorCode::kTooLarge,
                    what + " would bring the request's media over its limit of " +
                        std::to_string(total_) + " bytes");
      }
    } while (!remaining_.compare_exchange_weak(left, left - bytes, std::memory_order_relaxed));
  }

 private:
  const int64_t total_;
  std::atomic<int64_t> remaining_;
};

}  // namespace m3::net
