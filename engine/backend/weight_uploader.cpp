// WeightUploader: checks, conversion through Device::UploadWeight, releasing the source
// pages (source_pages.h), progress lines.
#include "engine/backend/weight_uploader.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::backend {

int64_t PeakResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream is(line.substr(6));
      int64_t kb = 0;
      is >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

WeightUploader::WeightUploader(const WeightStore& store, Device& device, SharedPageRelease* shared)
    : store_(store), device_(device), shared_(shared), start_(std::chrono::steady_clock::now()) {
  for (const auto& name : store_.Names()) total_bytes_ += store_.Get(name).nbytes;
  Log(LogLevel::kInfo, "loading weights from ", store_.dir(), ": ", total_bytes_ >> 20,
      " MiB of tensors onto the ", device_.name(), " backend");
}

TensorView WeightUploader::Checked(const std::string& name, const Shape& shape) const {
  auto view = store_.Find(name);
  Require(view.has_value(), ErrorCode::kNotFound,
          "weight '" + name + "' is missing from the checkpoint in " + store_.dir());
  Require(view->shape == shape, ErrorCode::kInvalidArgument,
          "weight '" + name + "' has shape " + ShapeString(view->shape) + ", expected " +
              ShapeString(shape) + " from config.json");
  Require(view->dtype == DType::kF32 || view->dtype == DType::kBF16 || view->dtype == DType::kF16 ||
              view->dtype == DType::kF64,
          ErrorCode::kInvalidArgument,
          "weight '" + name + "' has dtype " + std::string(DTypeName(view->dtype)) +
              ", expected a float type");
  return *view;
}

void WeightUploader::Done(const std::vector<TensorView>& views) {
  for (const auto& v : views) {
    read_bytes_ += static_cast<int64_t>(v.nbytes);
    ++tensors_;
    // The converted copy is all we keep: let the kernel drop the mapped source pages (at
    // once, or when the last rank of a group has read them).
    if (shared_)
      shared_->Read(v);
    else
      ReleasePages(v);
  }
  ReportProgress();
}

void WeightUploader::ReportProgress() {
  // Progress only where a load takes noticeable time; the summary line always comes.
  constexpr int64_t kProgressFrom = int64_t{256} << 20;
  while (total_bytes_ >= kProgressFrom &&
         read_bytes_ * 100 >= next_report_percent_ * total_bytes_ && next_report_percent_ <= 100) {
    Log(LogLevel::kInfo, "weights: ", next_report_percent_, "% (", read_bytes_ >> 20, " of ",
        total_bytes_ >> 20, " MiB)");
    next_report_percent_ += 10;
  }
}

DeviceTensor WeightUploader::Load(const std::string& name, const Shape& shape) {
  std::vector<TensorView> views{Checked(name, shape)};
  DeviceTensor t = device_.UploadWeight(views, shape);
  Done(views);
  return t;
}

DeviceTensor WeightUploader::LoadConcat(const std::vector<std::pair<std::string, Shape>>& parts,
                                        const Shape& shape) {
  std::vector<TensorView> views;
  for (const auto& [name, s] : parts) views.push_back(Checked(name, s));
  DeviceTensor t = device_.UploadWeight(views, shape);
  Done(views);
  return t;
}

DeviceTensor WeightUploader::LoadSlices(const std::vector<WeightSlice>& parts, const Shape& shape) {
  // Row slices are views of the mapping. A column slice is strided there, so its rows are
  // gathered into one contiguous host copy of just the slice (checkpoint dtype): backends then
  // convert and upload it in one piece rather than one transfer per row.
  std::vector<TensorView> views;
  std::vector<std::vector<uint8_t>> gathered;
  gathered.reserve(parts.size());
  for (const WeightSlice& s : parts) {
    const TensorView whole = Checked(s.name, s.shape);
    const int64_t R = s.shape.at(0), rows = s.rows < 0 ? R - s.row0 : s.rows;
    const int64_t C = s.shape.size() > 1 ? whole.numel() / R : 1;
    const int64_t cols = s.cols < 0 ? C - s.col0 : s.cols;
    Require(s.row0 >= 0 && rows >= 0 && s.row0 + rows <= R && s.col0 >= 0 && cols >= 0 &&
                s.col0 + cols <= C && (s.shape.size() == 2 || (s.col0 == 0 && cols == C)),
            ErrorCode::kInternal, "weight slice of '" + s.name + "' out of range");
    const size_t es = DTypeSize(whole.dtype);
    TensorView v = whole;
    v.shape[0] = rows;
    if (cols == C) {
      v.data = whole.data + static_cast<size_t>(s.row0 * C) * es;
    } else {
      v.shape = {rows, cols};
      std::vector<uint8_t>& buf = gathered.emplace_back(static_cast<size_t>(rows * cols) * es);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(buf.data() + static_cast<size_t>(r * cols) * es,
                    whole.data + static_cast<size_t>((s.row0 + r) * C + s.col0) * es,
                    static_cast<size_t>(cols) * es);
      v.data = buf.data();
    }
    v.nbytes = static_cast<size_t>(rows * cols) * es;
    views.push_back(v);
  }
  DeviceTensor t = device_.UploadWeight(views, shape);
  for (const TensorView& v : views) {
    read_bytes_ += static_cast<int64_t>(v.nbytes);
    ++tensors_;
  }
  // The other ranks read other slices of the same tensors: the last one releases each.
  for (const WeightSlice& s : parts) {
    const TensorView whole = *store_.Find(s.name);
    if (shared_)
      shared_->Read(whole, s.readers);
    else
      ReleasePages(whole);
  }
  ReportProgress();
  return t;
}

LoadReport WeightUploader::Finish() {
  LoadReport r;
  r.tensors = tensors_;
  r.checkpoint_bytes = read_bytes_;
  r.device_bytes = static_cast<int64_t>(device_.weight_bytes());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  r.peak_rss_bytes = PeakResidentBytes();
  Log(LogLevel::kInfo, "weights loaded: ", r.tensors, " tensors, ", r.checkpoint_bytes >> 20,
      " MiB read, ", r.device_bytes >> 20, " MiB on ", device_.name(), " in ", r.seconds,
      " s; peak resident ", r.peak_rss_bytes >> 20, " MiB");
  return r;
}

}  // namespace m3::engine::backend
