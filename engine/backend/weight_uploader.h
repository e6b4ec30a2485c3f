// WeightUploader: moves a checkpoint's tensors (mmapped views of one or several safetensors
// shards) onto a Device, converted once to the device's weight dtype, with each tensor's
// dtype and shape checked against what the config implies (a mismatched checkpoint fails at
// load, naming the tensor). Several source tensors can be fused into one (gate/up, QKV, stacked
// experts). Progress is logged every ~10% of the checkpoint's bytes (checkpoints of 256 MiB and
// more); after each tensor the source pages are released, so resident memory stays near the
// converted copy (no transient third copy). Finish() logs the totals and returns them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/backend/source_pages.h"
#include "shared/safetensors.h"

namespace m3::engine::backend {

struct LoadReport {
  int64_t tensors = 0;
  int64_t checkpoint_bytes = 0;  // bytes read from the checkpoint
  int64_t device_bytes = 0;      // bytes the device holds for the weights
  double seconds = 0;
  int64_t peak_rss_bytes = 0;  // the process high-water mark (VmHWM), 0 when unknown
};

// A part of one checkpoint tensor: rows [row0, row0 + rows) of dimension 0 and, for 2-D
// tensors, columns [col0, col0 + cols) (-1: to the end). A rank of a tensor-parallel group loads
// its row slices straight from the mmapped views; a column slice is gathered into a host copy
// of just that slice first (one upload instead of one per row).
struct WeightSlice {
  std::string name;
  Shape shape;  // the whole tensor's expected shape
  int64_t row0 = 0, rows = -1;
  int64_t col0 = 0, cols = -1;
  int readers = 0;  // ranks reading (a slice of) this tensor (SharedPageRelease); 0: all
};

class WeightUploader {
 public:
  // shared: the group's release tracker when several uploaders read one store (sliced loads).
  WeightUploader(const WeightStore& store, Device& device, SharedPageRelease* shared = nullptr);

  // One tensor of exactly `shape`. Throws kNotFound when missing, kInvalidArgument on a
  // non-float dtype or another shape.
  DeviceTensor Load(const std::string& name, const Shape& shape);
  // Tensors, each of its own expected shape, concatenated along dimension 0 into `shape`.
  DeviceTensor LoadConcat(const std::vector<std::pair<std::string, Shape>>& parts,
                          const Shape& shape);

  // Slices, concatenated along dimension 0 into `shape`.
  DeviceTensor LoadSlices(const std::vector<WeightSlice>& parts, const Shape& shape);

  LoadReport Finish();

 private:
  TensorView Checked(const std::string& name, const Shape& shape) const;
  void Done(const std::vector<TensorView>& views);
  void ReportProgress();  // every ~10% of the checkpoint read

  const WeightStore& store_;
  Device& device_;
  SharedPageRelease* shared_ = nullptr;
  int64_t total_bytes_ = 0;
  int64_t read_bytes_ = 0;
  int64_t tensors_ = 0;
  int next_report_percent_ = 10;
  std::chrono::steady_clock::time_point start_;
};

// The process's peak resident set (VmHWM of /proc/self/status), 0 when unknown.
int64_t PeakResidentBytes();

}  // namespace m3::engine::backend
