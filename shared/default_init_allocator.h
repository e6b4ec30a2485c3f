// DefaultInitAllocator: a std::allocator whose value-less construct() default-initializes, so
// vector<uint8_t>::resize() leaves new bytes uninitialized. Buffers that a decoder or kernel
// overwrites completely right after allocation (pictures, preprocessing outputs) use it:
// zero-filling megabytes first would only cost time.
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace m3 {

template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

}  // namespace m3
