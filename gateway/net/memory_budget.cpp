// The in-flight byte budget (see memory_budget.h).
#include "gateway/net/memory_budget.h"

namespace m3::net {

bool MemoryBudget::TryAcquire(int64_t bytes) {
  int64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ - used) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Reset();
    budget_ = std::move(other.budget_);
    bytes_ = other.bytes_;
    other.bytes_ = 0;
  }
  return *this;
}

bool MemoryBudget::Reservation::TryGrow(int64_t bytes) {
  if (bytes <= 0) return true;
  if (budget_ && !budget_->TryAcquire(bytes)) return false;
  bytes_ += bytes;
  return true;
}

void MemoryBudget::Reservation::Reset() {
  if (budget_ && bytes_ > 0) budget_->Release(bytes_);
  bytes_ = 0;
}

}  // namespace m3::net
