// StepMetadata: the batch layout of one forward step on the device (positions, query starts,
// context lengths, block tables, KV slots, the text rotary rows), built once per step by
// Device::PrepareStep and read by every layer's ops, plus the host-side maxima the kernels'
// launch decisions use.
#pragma once

#include <cstdint>

#include "engine/backend/device_tensor.h"
#include "engine/step/forward_batch.h"

namespace m3::engine::backend {

struct StepMetadata {
  int64_t rows = 0;
  int64_t seqs = 0;
  int64_t num_decodes = 0;
  int64_t page_size = 0;
  int64_t max_pages_per_seq = 0;
  int64_t max_query_len = 0;  // longest row run of one sequence this step
  int64_t max_seq_len = 0;    // longest context_len + rows
  DeviceTensor positions;     // i32 [rows]
  DeviceTensor query_start;   // i32 [seqs + 1]
  DeviceTensor context_lens;  // i32 [seqs]
  DeviceTensor block_tables;  // i32 [seqs, max_pages_per_seq]
  DeviceTensor slot_mapping;  // i64 [rows]
  DeviceTensor rope_cos;      // f32 [rows, rotary_dim] of the text rotary, [freqs, freqs]
  DeviceTensor rope_sin;
  const ForwardBatch* batch = nullptr;  // the host batch it was built from (valid for the step)
};

}  // namespace m3::engine::backend
