// LayerKvCache::Append.
#include "engine/kv_cache.h"

namespace m3::engine {

void LayerKvCache::Append(const float* k, const float* v, const float* idx_k, int64_t rows) {
  k_.insert(k_.end(), k, k + rows * kv_width_);
  v_.insert(v_.end(), v, v + rows * kv_width_);
  if (index_width_ > 0 && idx_k) idx_k_.insert(idx_k_.end(), idx_k, idx_k + rows * index_width_);
  length_ += rows;
}

}  // namespace m3::engine
