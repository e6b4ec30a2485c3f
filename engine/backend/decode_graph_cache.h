// DecodeGraphCache: recorded decode steps (CUDA graphs through Device::Record) keyed by bucket.
// A decode-only step (every row one sequence's next token) of R rows whose block tables are W
// pages wide runs as the graph of bucket (R', W') with R' >= R from the row buckets (1, 2, 4, 8,
// 16, 24, 32, then steps of 16 up to max_rows) and W' the next power of two >= W: its inputs
// (token ids, positions, row starts, context lengths, block tables, slot mapping, rotary rows)
// are written into the buffers the graph was recorded with, padded rows are dummy decodes at
// position 0 writing their K/V into a page no sequence owns (pad_page), and the logits of the
// first R rows are read back. Kernels' launch configurations depend only on R' and W' (their
// per-row context lengths are read on the device), so one recording serves every such step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/backend/device.h"
#include "engine/step/forward_batch.h"

namespace m3::engine::backend {

class DecodeGraphCache {
 public:
  // The whole forward on prepared device inputs, returning float32 logits [meta.rows, vocab].
  using Forward = std::function<DeviceTensor(const StepMetadata&, const DeviceTensor&)>;

  // record: capture each bucket's step as a graph and replay it; otherwise every step runs op by
  // op at its bucket's shape (the same launches on the same padded inputs: the same results).
  DecodeGraphCache(Device& device, int64_t max_rows, int64_t max_width, int64_t page_size,
                   int32_t pad_page, int64_t rotary_dim, bool record = true);

  static std::vector<int64_t> RowBuckets(int64_t max_rows);
  // The row bucket holding `rows` (0: above every bucket) and the width bucket of `width` pages.
  int64_t RowBucket(int64_t rows) const;
  int64_t WidthBucket(int64_t width) const;
  int64_t max_rows() const { return buckets_.empty() ? 0 : buckets_.back(); }
  int64_t max_width() const { return max_width_; }

  // Runs a decode-only batch (already validated; cos/sin its rotary rows [rows, rotary_dim])
  // through its bucket's graph, recording it on first use, and hands `take` the logits
  // [rows, vocab] on the device. False (nothing run) when the batch has no bucket or its bucket
  // cannot be recorded.
  //
  // Speculative decoding's verify steps take the same path: a batch whose sequences all run q
  // rows (the last token and q - 1 drafts; num_decodes 0, every row's logits wanted) runs as
  // the bucket (sequences S' >= S from the row buckets, q, width), padded with sequences of q
  // dummy rows at positions 0 .. q - 1 on the pad page (q must fit in a page). `max_rows` bounds
  // S' q (the rows and logits rows the step workspace holds; 0: no verify steps).
  bool Run(const ForwardBatch& b, std::span<const float> cos, std::span<const float> sin,
           const Forward& forward, const std::function<void(const DeviceTensor&)>& take,
           int64_t max_rows = 0);
  // The rows every sequence of `b` runs when they all run the same number, with logits at each
  // and no media (a decode-only step: 1; a uniform verify step: q); 0 otherwise.
  static int64_t UniformQueryRows(const ForwardBatch& b);

  bool records() const { return record_; }
  int64_t recorded() const { return recorded_; }  // graphs recorded so far
  int64_t replays() const { return replays_; }    // steps run at a bucket's shape
  // The operations (StepGraph::operations) of the bucket recorded last; 0 before any.
  int64_t last_recorded_operations() const { return last_operations_; }

 private:
  struct Entry {
    int64_t rows = 0, width = 0, q = 1;  // rows: sequences of q rows each
    DeviceTensor inputs;                 // every input in one buffer (one upload per step)
    StepMetadata meta;
    DeviceTensor ids, logits;  // logits: the recorded forward's output
    std::unique_ptr<StepGraph> graph;
    bool failed = false;        // recording failed: this bucket runs eagerly
    size_t workspace_end = 0;   // step workspace the recording took (its logits lie below)
    std::vector<uint8_t> host;  // the inputs' host image
  };
  Entry& Get(int64_t seqs, int64_t width, int64_t q);

  Device& device_;
  std::vector<int64_t> buckets_;
  int64_t max_width_, page_size_, rotary_dim_;
  int32_t pad_page_;
  bool record_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Entry> entries_;
  int64_t recorded_ = 0, replays_ = 0;
  int64_t last_operations_ = 0;
};

}  // namespace m3::engine::backend
