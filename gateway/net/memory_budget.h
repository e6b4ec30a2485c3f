// MemoryBudget: a process-wide count of the bytes that requests in flight hold (request bodies
// as they arrive, output tensors before they are allocated), with a hard limit. Callers
// reserve before they commit memory and get "no" instead of waiting, so a burst of large
// requests is refused with 429 rather than driving the process into swap or the OOM killer.
// Reservations are RAII and thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace m3::net {

class MemoryBudget : public std::enable_shared_from_this<MemoryBudget> {
 public:
  explicit MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}

  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Reset(); }

    // Adds `bytes` to this reservation; false (nothing changed) when the budget has no room.
    // A reservation opened on no budget (default-constructed) always has room.
    bool TryGrow(int64_t bytes);
    void Reset();
    int64_t bytes() const { return bytes_; }

   private:
    friend class MemoryBudget;
    std::shared_ptr<MemoryBudget> budget_;
    int64_t bytes_ = 0;
  };

  // An empty reservation on this budget (grow it with TryGrow). The budget must be owned by a
  // shared_ptr.
  Reservation Open() {
    Reservation r;
    r.budget_ = shared_from_this();
    return r;
  }

  int64_t limit() const { return limit_; }
  int64_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  bool TryAcquire(int64_t bytes);
  void Release(int64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

}  // namespace m3::net
