// ReleasePages / SharedPageRelease: madvise(MADV_DONTNEED) on whole pages inside a tensor.
#include "engine/backend/source_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace m3::engine::backend {

void ReleasePages(const TensorView& v) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  // Only whole pages inside this tensor, so neighbours still to be read stay mapped.
  const uintptr_t b = (reinterpret_cast<uintptr_t>(v.data) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(v.data) + v.nbytes) / page * page;
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

void SharedPageRelease::Read(const TensorView& view, int readers) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (++reads_[view.data] < (readers > 0 ? readers : readers_)) return;
    reads_.erase(view.data);
  }
  ReleasePages(view);
}

}  // namespace m3::engine::backend
