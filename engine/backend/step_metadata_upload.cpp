// UploadStepMetadata: one Alloc + Upload per field, in the backend's own order of operations.
#include "engine/backend/step_metadata_upload.h"

#include <algorithm>
#include <utility>

namespace m3::engine::backend {

StepMetadata UploadStepMetadata(Backend& be, const ForwardBatch& b, int64_t page_size,
                                std::span<const float> rope_cos, std::span<const float> rope_sin,
                                int64_t rotary_dim) {
  StepMetadata m;
  m.rows = b.num_rows();
  m.seqs = b.num_seqs();
  m.num_decodes = b.num_decodes;
  m.page_size = page_size;
  m.max_pages_per_seq = b.max_pages_per_seq;
  m.batch = &b;
  for (int64_t s = 0; s < m.seqs; ++s) {
    const int64_t q = b.query_start[s + 1] - b.query_start[s];
    m.max_query_len = std::max(m.max_query_len, q);
    m.max_seq_len = std::max(m.max_seq_len, b.context_lens[s] + q);
  }
  auto put = [&](DType dt, Shape shape, const void* src) {
    DeviceTensor t = be.Alloc(dt, std::move(shape));
    be.Upload(src, t);
    return t;
  };
  m.positions = put(DType::kI32, {m.rows}, b.positions.data());
  m.query_start = put(DType::kI32, {m.seqs + 1}, b.query_start.data());
  m.context_lens = put(DType::kI32, {m.seqs}, b.context_lens.data());
  m.block_tables = put(DType::kI32, {m.seqs, m.max_pages_per_seq}, b.block_tables.data());
  m.slot_mapping = put(DType::kI64, {m.rows}, b.slot_mapping.data());
  m.rope_cos = put(DType::kF32, {m.rows, rotary_dim}, rope_cos.data());
  m.rope_sin = put(DType::kF32, {m.rows, rotary_dim}, rope_sin.data());
  return m;
}

}  // namespace m3::engine::backend
