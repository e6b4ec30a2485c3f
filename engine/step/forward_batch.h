// ForwardBatch: one engine step as a flat batch of rows (tokens) from many sequences, built once
// per step by the scheduler and executed by a ModelRunner (model_runner.h) in one forward pass.
//
// Layout rules (the scheduler guarantees them, the runner checks the cheap ones):
//  - sequences are contiguous row ranges [query_start[s], query_start[s + 1]), rows of one
//    sequence in increasing position order; the first num_decodes sequences are decodes (one row
//    each), the rest prefill chunks of any length starting at any offset (context_lens[s]);
//  - row r of sequence s sits at position context_lens[s] + (r - query_start[s]) of its sequence
//    (positions[] repeats it explicitly so backends need not recompute it);
//  - block_tables[s] lists the pages holding positions [0, context_lens[s] + rows(s)) of s, in
//    order (page j holds positions [j * page_size, (j + 1) * page_size)), padded with -1;
//  - slot_mapping[r] = page * page_size + offset is where row r's K, V (and index keys) go;
//  - media spans never overlap and only cover rows whose token id is the image / video
//    placeholder; a span takes feature rows [offset, offset + length) of one encoded segment.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/step/encoder_output.h"

namespace m3::engine {

// Rows of this step that take vision features instead of token embeddings.
struct MediaSpan {
  int64_t row = 0;                                // first batch row
  int64_t length = 0;                             // number of rows
  std::shared_ptr<const EncoderOutput> features;  // one encoded segment (ModelRunner::Encode)
  int64_t offset = 0;                             // first feature row used
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;     // [rows] (placeholder ids where media spans apply)
  std::vector<int32_t> positions;     // [rows]
  std::vector<int32_t> query_start;   // [seqs + 1] row offsets; decode sequences come first
  std::vector<int32_t> context_lens;  // [seqs] tokens already cached before this step
  int32_t num_decodes = 0;            // the first num_decodes sequences have exactly one row
  std::vector<int32_t> block_tables;  // [seqs, max_pages_per_seq] page ids, -1 padded
  int32_t max_pages_per_seq = 0;
  std::vector<int64_t> slot_mapping;  // [rows] page * page_size + offset of the row's KV
  std::vector<int32_t> logits_rows;   // rows whose next-token logits are wanted (ascending)
  std::vector<MediaSpan> media;

  int64_t num_rows() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_seqs() const {
    return query_start.empty() ? 0 : static_cast<int64_t>(query_start.size()) - 1;
  }
};

}  // namespace m3::engine
