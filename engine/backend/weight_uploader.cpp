// WeightUploader: checks, conversion through Device::UploadWeight / UploadQuantizedLinear,
// slicing of quantized Linears, dummy draws, releasing the source pages (source_pages.h),
// progress lines.
#include "engine/backend/weight_uploader.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/backend/linear_layout.h"
#include "engine/backend/quantized_parts.h"
#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::backend {

namespace {

std::string ModuleOf(const std::string& name) {
  constexpr std::string_view kWeight = ".weight";
  return name.ends_with(kWeight) ? name.substr(0, name.size() - kWeight.size()) : name;
}

// Rows [row0, row0 + rows) and columns [col0, col0 + cols) of a 2-D view (in its own
// elements): a view of the mapping when the columns are whole, else a copy gathered into
// `gathered` (kept alive by the caller until the upload).
TensorView Slice2D(const TensorView& whole, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                   std::vector<std::vector<uint8_t>>& gathered) {
  const int64_t C = whole.shape.at(1);
  const size_t es = DTypeSize(whole.dtype);
  TensorView v = whole;
  v.shape = {rows, cols};
  v.nbytes = static_cast<size_t>(rows * cols) * es;
  if (cols == C) {
    v.data = whole.data + static_cast<size_t>(row0 * C) * es;
    return v;
  }
  std::vector<uint8_t>& buf = gathered.emplace_back(v.nbytes);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(buf.data() + static_cast<size_t>(r * cols) * es,
                whole.data + static_cast<size_t>((row0 + r) * C + col0) * es,
                static_cast<size_t>(cols) * es);
  v.data = buf.data();
  return v;
}

TensorView F32View(const std::vector<float>& v, const Shape& shape) {
  return {DType::kF32, shape, reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
}

}  // namespace

uint64_t DummySeed(const std::string& name, int64_t row0, int64_t col0) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  for (int64_t x : {row0, col0}) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
  return h;
}

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
    : store_(&store), device_(device), shared_(shared), start_(std::chrono::steady_clock::now()) {
  for (const auto& name : store_->Names()) total_bytes_ += store_->Get(name).nbytes;
  Log(LogLevel::kInfo, "loading weights from ", store_->dir(), ": ", total_bytes_ >> 20,
      " MiB of tensors onto the ", device_.name(), " backend");
}

WeightUploader::WeightUploader(Device& device, QuantConfig quant)
    : quant_(std::move(quant)), device_(device), start_(std::chrono::steady_clock::now()) {
  Log(LogLevel::kInfo, "dummy weights (no files read) on the ", device_.name(),
      " backend; quantization: ", quant_.Describe());
}

bool WeightUploader::Has(const std::string& name) const {
  return store_ && store_->Has(name);
}

TensorView WeightUploader::Checked(const std::string& name, const Shape& shape) const {
  auto view = store_->Find(name);
  Require(view.has_value(), ErrorCode::kNotFound,
          "weight '" + name + "' is missing from the checkpoint in " + store_->dir());
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
  for (const auto& v : views) Release(v, 0);
  ReportProgress();
}

void WeightUploader::Release(const TensorView& v, int readers) {
  read_bytes_ += static_cast<int64_t>(v.nbytes);
  ++tensors_;
  // The converted copy is all we keep: let the kernel drop the mapped source pages (at
  // once, or when the last rank of a group has read them).
  if (shared_)
    shared_->Read(v, readers);
  else
    ReleasePages(v);
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

DeviceTensor WeightUploader::Load(const std::string& name, const Shape& shape, DummyInit init) {
  if (dummy()) {
    ++tensors_;
    return device_.DummyWeight(shape, init.mean, init.std, DummySeed(name));
  }
  std::vector<TensorView> views{Checked(name, shape)};
  DeviceTensor t = device_.UploadWeight(views, shape);
  Done(views);
  return t;
}

DeviceTensor WeightUploader::LoadConcat(const std::vector<std::pair<std::string, Shape>>& parts,
                                        const Shape& shape, DummyInit init) {
  if (dummy()) {
    tensors_ += static_cast<int64_t>(parts.size());
    return device_.DummyWeight(shape, init.mean, init.std, DummySeed(parts.at(0).first));
  }
  std::vector<TensorView> views;
  for (const auto& [name, s] : parts) views.push_back(Checked(name, s));
  DeviceTensor t = device_.UploadWeight(views, shape, [&](size_t i) { Release(views[i], 0); });
  ReportProgress();
  return t;
}

DeviceTensor WeightUploader::LoadSlices(const std::vector<WeightSlice>& parts, const Shape& shape,
                                        DummyInit init) {
  if (dummy()) {
    tensors_ += static_cast<int64_t>(parts.size());
    const WeightSlice& s = parts.at(0);
    return device_.DummyWeight(shape, init.mean, init.std, DummySeed(s.name, s.row0, s.col0));
  }
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
  // Each part's pages go as soon as the device has read it (the other ranks read other slices
  // of the same tensors: the last one releases each).
  DeviceTensor t = device_.UploadWeight(views, shape, [&](size_t i) {
    read_bytes_ += static_cast<int64_t>(views[i].nbytes);
    ++tensors_;
    const TensorView whole = *store_->Find(parts[i].name);
    if (shared_)
      shared_->Read(whole, parts[i].readers);
    else
      ReleasePages(whole);
  });
  ReportProgress();
  return t;
}

LinearWeight WeightUploader::DummyLinear(const std::vector<WeightSlice>& parts,
                                         const Shape& shape) {
  const WeightFormat format = quant_.FormatOf(ModuleOf(parts.at(0).name));
  for (const WeightSlice& p : parts)
    if (quant_.FormatOf(ModuleOf(p.name)) != format) {
      Log(LogLevel::kWarn, "the quantization config gives the fused parts of '", parts[0].name,
          "' different formats: dummy weights dense");
      tensors_ += static_cast<int64_t>(parts.size());
      return LinearWeight(device_.DummyWeight(
          shape, 0, 0.02f, DummySeed(parts[0].name, parts[0].row0, parts[0].col0)));
    }
  const int64_t block = WeightFormatBlock(format);
  Require(shape.back() % block == 0, ErrorCode::kInvalidArgument,
          "weight '" + parts[0].name + "': the quantization config makes it " +
              std::string(WeightFormatName(format)) +
              " but its K = " + std::to_string(shape.back()) +
              " (this rank's) is not a multiple of " + std::to_string(block));
  tensors_ += static_cast<int64_t>(parts.size());
  return device_.DummyLinear(format, shape, 0.02f,
                             DummySeed(parts[0].name, parts[0].row0, parts[0].col0));
}

LinearWeight WeightUploader::LoadLinear(const std::vector<WeightSlice>& parts, const Shape& shape) {
  if (dummy()) return DummyLinear(parts, shape);
  std::vector<LinearLayout> layouts;
  layouts.reserve(parts.size());
  bool all_dense = true, same = true;
  for (const WeightSlice& s : parts) {
    layouts.push_back(DetectLinearLayout(*store_, s.name, &s.shape));
    all_dense &= layouts.back().format == WeightFormat::kDense;
    same &= layouts.back().format == layouts.front().format;
  }
  if (all_dense) return LinearWeight(LoadSlices(parts, shape));

  // Each part's rows and columns, with the column range checked against the format's blocks.
  struct Range {
    int64_t row0, rows, col0, cols, K;
  };
  std::vector<Range> ranges;
  for (size_t i = 0; i < parts.size(); ++i) {
    const WeightSlice& s = parts[i];
    const Shape full = layouts[i].shape();
    Require(full.size() == 2, ErrorCode::kInternal, "quantized weight '" + s.name + "' not 2-D");
    const int64_t R = full[0], K = full[1];
    const int64_t rows = s.rows < 0 ? R - s.row0 : s.rows, cols = s.cols < 0 ? K - s.col0 : s.cols;
    Require(s.row0 >= 0 && rows >= 0 && s.row0 + rows <= R && s.col0 >= 0 && cols >= 0 &&
                s.col0 + cols <= K,
            ErrorCode::kInternal, "weight slice of '" + s.name + "' out of range");
    const WeightFormat f = layouts[i].format;
    const int64_t block = WeightFormatBlock(f);
    Require(f == WeightFormat::kDense || (s.col0 % block == 0 && cols % block == 0),
            ErrorCode::kInvalidArgument,
            "weight '" + s.name + "' is " + std::string(WeightFormatName(f)) + " (blocks of " +
                std::to_string(block) + " along K) but this rank's columns [" +
                std::to_string(s.col0) + ", " + std::to_string(s.col0 + cols) +
                ") of its K = " + std::to_string(K) +
                " split a block: choose a tensor-parallel size whose slices hold whole blocks");
    ranges.push_back({s.row0, rows, s.col0, cols, K});
  }

  std::vector<std::vector<uint8_t>> gathered;
  LinearWeight out;
  if (same) {
    const WeightFormat f = layouts.front().format;
    const int64_t block = WeightFormatBlock(f);
    const bool mx = f == WeightFormat::kMxfp8;
    std::vector<QuantizedPart> qparts;
    for (size_t i = 0; i < parts.size(); ++i) {
      const Range& r = ranges[i];
      QuantizedPart q;
      q.codes = mx ? Slice2D(layouts[i].weight, r.row0, r.rows, r.col0, r.cols, gathered)
                   : Slice2D(layouts[i].weight, r.row0, r.rows, r.col0 / 2, r.cols / 2, gathered);
      q.scales =
          Slice2D(layouts[i].scales, r.row0, r.rows, r.col0 / block, r.cols / block, gathered);
      q.global_scale = layouts[i].global_scale;
      qparts.push_back(q);
    }
    out = device_.UploadQuantizedLinear(f, qparts, shape);
  } else {
    Log(LogLevel::kWarn, "the fused parts of '", parts[0].name,
        "' are stored in different formats: dequantized to one dense weight");
    std::vector<float> dense;
    dense.reserve(static_cast<size_t>(NumElements(shape)));
    for (size_t i = 0; i < parts.size(); ++i) {
      const Range& r = ranges[i];
      const LinearLayout& l = layouts[i];
      std::vector<float> part;
      if (l.format == WeightFormat::kDense) {
        part =
            ToFloat32(Slice2D(l.weight, r.row0, r.rows, r.col0, r.cols, gathered), parts[i].name);
      } else {
        const int64_t block = WeightFormatBlock(l.format);
        const bool mx = l.format == WeightFormat::kMxfp8;
        QuantizedPart q;
        q.codes = mx ? Slice2D(l.weight, r.row0, r.rows, r.col0, r.cols, gathered)
                     : Slice2D(l.weight, r.row0, r.rows, r.col0 / 2, r.cols / 2, gathered);
        q.scales = Slice2D(l.scales, r.row0, r.rows, r.col0 / block, r.cols / block, gathered);
        q.global_scale = l.global_scale;
        part = DequantizeParts(l.format, {&q, 1}, {r.rows, r.cols});
      }
      dense.insert(dense.end(), part.begin(), part.end());
    }
    Require(static_cast<int64_t>(dense.size()) == NumElements(shape), ErrorCode::kInternal,
            "fused parts of '" + parts[0].name + "' do not fill " + ShapeString(shape));
    const TensorView v = F32View(dense, shape);
    out = LinearWeight(device_.UploadWeight({&v, 1}, shape));
  }
  // The other ranks read other slices of the same tensors: the last one releases each.
  for (size_t i = 0; i < parts.size(); ++i) {
    Release(layouts[i].weight, parts[i].readers);
    if (layouts[i].format != WeightFormat::kDense) Release(layouts[i].scales, parts[i].readers);
  }
  ReportProgress();
  return out;
}

LoadReport WeightUploader::Finish() {
  LoadReport r;
  r.tensors = tensors_;
  r.checkpoint_bytes = read_bytes_;
  r.device_bytes = static_cast<int64_t>(device_.weight_bytes());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  r.peak_rss_bytes = PeakResidentBytes();
  Log(LogLevel::kInfo, "weights ", dummy() ? "drawn" : "loaded", ": ", r.tensors, " tensors, ",
      r.checkpoint_bytes >> 20, " MiB read, ", r.device_bytes >> 20, " MiB on ", device_.name(),
      " in ", r.seconds, " s; peak resident ", r.peak_rss_bytes >> 20, " MiB");
  return r;
}

}  // namespace m3::engine::backend
