// UploadStepMetadata: one Alloc + Upload per field, in the device's own order of operations;
// the host rotary rows of the default PrepareStepFromPositions.
#include "engine/backend/step_metadata_upload.h"

#include <algorithm>
#include <utility>

#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/rope.h"

namespace m3::engine::backend {
namespace {

DeviceTensor Put(Device& dev, DType dt, Shape shape, const void* src) {
  DeviceTensor t = dev.Alloc(dt, std::move(shape));
  dev.Upload(src, t);
  return t;
}

}  // namespace

StepMetadata UploadStepLayout(Device& dev, const ForwardBatch& b, int64_t page_size) {
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
  m.positions = Put(dev, DType::kI32, {m.rows}, b.positions.data());
  m.query_start = Put(dev, DType::kI32, {m.seqs + 1}, b.query_start.data());
  m.context_lens = Put(dev, DType::kI32, {m.seqs}, b.context_lens.data());
  m.block_tables = Put(dev, DType::kI32, {m.seqs, m.max_pages_per_seq}, b.block_tables.data());
  m.slot_mapping = Put(dev, DType::kI64, {m.rows}, b.slot_mapping.data());
  return m;
}

StepMetadata UploadStepMetadata(Device& dev, const ForwardBatch& b, int64_t page_size,
                                std::span<const float> rope_cos, std::span<const float> rope_sin,
                                int64_t rotary_dim) {
  StepMetadata m = UploadStepLayout(dev, b, page_size);
  m.rope_cos = Put(dev, DType::kF32, {m.rows, rotary_dim}, rope_cos.data());
  m.rope_sin = Put(dev, DType::kF32, {m.rows, rotary_dim}, rope_sin.data());
  return m;
}

void HostRopeTables(const ForwardBatch& b, std::span<const float> inv_freq, std::vector<float>& cos,
                    std::vector<float>& sin) {
  const int64_t rows = b.num_rows(), rot = 2 * static_cast<int64_t>(inv_freq.size());
  const std::vector<float> freqs(inv_freq.begin(), inv_freq.end());
  cos.resize(rows * rot);
  sin.resize(rows * rot);
  kernels::cpu::ParallelFor(rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      kernels::cpu::RopeCosSin(b.positions[r], freqs, cos.data() + r * rot, sin.data() + r * rot);
  });
}

StepMetadata Device::PrepareStepFromPositions(const ForwardBatch& b, int64_t page_size,
                                              std::span<const float> inv_freq) {
  std::vector<float> cos, sin;
  HostRopeTables(b, inv_freq, cos, sin);
  return PrepareStep(b, page_size, cos, sin, 2 * static_cast<int64_t>(inv_freq.size()));
}

}  // namespace m3::engine::backend
