// WeightUploader: moves a checkpoint's tensors (mmapped views of one or several safetensors
// shards) onto a Device, converted once to the device's weight dtype, with each tensor's
// dtype and shape checked against what the config implies (a mismatched checkpoint fails at
// load, naming the tensor). Several source tensors can be fused into one (gate/up, QKV, stacked
// experts). Linears (LoadLinear) are loaded in the format their tensors have (linear_layout.h):
// dense, MXFP8 or NVFP4, handed to Device::UploadQuantizedLinear when quantized. Progress is logged
// every ~10% of the checkpoint's bytes (checkpoints of 256 MiB and more); the source pages of each
// part are released as soon as the device has read it (Device::UploadWeight's part_read), so
// resident memory stays near one part of the tensor being loaded (no transient third copy).
// Finish() logs the totals and returns them. In dummy mode (--load-format dummy) no file is read:
// every tensor is drawn by the device (Device::DummyWeight / DummyLinear), Linears in the format
// the quantization config gives their module, each from a seed derived from its name (and slice:
// see DummySeed).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/backend/quant_config.h"
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

// How a dummy tensor is drawn: normal(mean, std) (std 0: every element `mean`).
struct DummyInit {
  float mean = 0.0f;
  float std = 0.02f;
};

// The seed of a dummy tensor: a hash of its name and the first row / column of the slice a
// rank draws. Whole tensors (replicated on every rank) get the same values on every rank; the
// slices of a tensor-parallel group are drawn independently (together they are some random
// tensor, not the slices of the one a single rank would draw).
uint64_t DummySeed(const std::string& name, int64_t row0 = 0, int64_t col0 = 0);

class WeightUploader {
 public:
  // shared: the group's release tracker when several uploaders read one store (sliced loads).
  WeightUploader(const WeightStore& store, Device& device, SharedPageRelease* shared = nullptr);
  // Dummy weights: no store; Linears in the formats `quant` gives their modules.
  WeightUploader(Device& device, QuantConfig quant);

  bool dummy() const { return store_ == nullptr; }
  // Whether the checkpoint holds `name` (dummy: false).
  bool Has(const std::string& name) const;

  // One tensor of exactly `shape`. Throws kNotFound when missing, kInvalidArgument on a
  // non-float dtype or another shape.
  // `init`: how dummy mode draws it.
  DeviceTensor Load(const std::string& name, const Shape& shape, DummyInit init = {});
  // Tensors, each of its own expected shape, concatenated along dimension 0 into `shape`.
  DeviceTensor LoadConcat(const std::vector<std::pair<std::string, Shape>>& parts,
                          const Shape& shape, DummyInit init = {});

  // Slices, concatenated along dimension 0 into `shape`.
  DeviceTensor LoadSlices(const std::vector<WeightSlice>& parts, const Shape& shape,
                          DummyInit init = {});

  // A Linear from slices of `X.weight` tensors (each WeightSlice's shape the dequantized
  // [N, K] config.json implies), concatenated along dimension 0 into `shape` ([..., N, K]),
  // in the format the tensors have. Quantized row slices take rows of the codes and scales;
  // column slices must start and end on the format's blocks (kInvalidArgument naming the
  // tensor otherwise) and gather codes and scale columns. Parts of different formats (not in
  // the released checkpoints) are dequantized to one dense weight, with a warning.
  LinearWeight LoadLinear(const std::vector<WeightSlice>& parts, const Shape& shape);

  LoadReport Finish();

 private:
  TensorView Checked(const std::string& name, const Shape& shape) const;
  void Done(const std::vector<TensorView>& views);
  // Counts `v` as read and releases its pages (at once, or when the last of `readers` has).
  void Release(const TensorView& v, int readers);
  void ReportProgress();  // every ~10% of the checkpoint read
  LinearWeight DummyLinear(const std::vector<WeightSlice>& parts, const Shape& shape);

  const WeightStore* store_ = nullptr;
  QuantConfig quant_;
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
