// CpuDevice: aligned host buffers (host_buffer.h), weights converted to float32 on the host's
// threads (expert stacks transposed to K-major on the way), the step metadata uploaded as it is
// and sampling on the host's BatchSampler.
#include "engine/backend/cpu/cpu_device.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backend/cpu/host_buffer.h"
#include "engine/backend/step_metadata_upload.h"
#include "kernels/cpu/moe_experts.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/small_m_gemm.h"

namespace m3::engine::backend {
namespace {

namespace k = m3::kernels::cpu;

void Check(bool ok, const char* what) {
  Require(ok, ErrorCode::kInternal, std::string("cpu backend: ") + what);
}

// Converts n elements of a float checkpoint dtype to float32.
void ConvertToF32(const TensorView& src, int64_t begin, int64_t n, float* dst) {
  switch (src.dtype) {
    case DType::kF32:
      std::memcpy(dst, src.data + begin * 4, static_cast<size_t>(n) * 4);
      return;
    case DType::kBF16: {
      const uint8_t* p = src.data + begin * 2;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + i * 2, 2);
        dst[i] = BF16ToF32(v);
      }
      return;
    }
    case DType::kF16: {
      const uint8_t* p = src.data + begin * 2;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + i * 2, 2);
        dst[i] = F16ToF32(v);
      }
      return;
    }
    case DType::kF64: {
      const uint8_t* p = src.data + begin * 8;
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, p + i * 8, 8);
        dst[i] = static_cast<float>(v);
      }
      return;
    }
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  "weight dtype " + std::string(DTypeName(src.dtype)) + " is not a float type");
  }
}

// Elements [begin, begin + n) of the parts concatenated, as float32.
void ConvertConcatRange(std::span<const TensorView> parts, int64_t begin, int64_t n, float* dst) {
  for (const auto& p : parts) {
    const int64_t size = p.numel();
    if (begin >= size) {
      begin -= size;
      continue;
    }
    const int64_t take = std::min(n, size - begin);
    ConvertToF32(p, begin, take, dst);
    dst += take;
    n -= take;
    begin = 0;
    if (n == 0) return;
  }
}

}  // namespace

CpuDevice::CpuDevice() : experts_k_major_(k::SmallMKernelsEnabled()) {}

DeviceTensor CpuDevice::Alloc(DType dtype, Shape shape) {
  DeviceTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.buffer = std::make_shared<HostBuffer>(t.bytes(), live_);
  return t;
}
void CpuDevice::Upload(const void* host, const DeviceTensor& dst) {
  if (IsKMajorExperts(dst)) {
    k::TransposeEachExpert(static_cast<const float*>(host), dst.dim(0), dst.dim(1), dst.dim(2),
                           dst.data<float>());
  } else if (dst.bytes()) {
    std::memcpy(dst.data<uint8_t>(), host, dst.bytes());
  }
}
void CpuDevice::Download(const DeviceTensor& src, void* host) {
  if (IsKMajorExperts(src)) {
    k::TransposeEachExpert(src.data<float>(), src.dim(0), src.dim(2), src.dim(1),
                           static_cast<float*>(host));
  } else if (src.bytes()) {
    std::memcpy(host, src.data<uint8_t>(), src.bytes());
  }
}

DeviceTensor CpuDevice::UploadWeight(std::span<const TensorView> parts, Shape shape,
                                     const PartRead& part_read) {
  int64_t total = 0;
  for (const auto& p : parts) total += p.numel();
  Check(total == NumElements(shape), "UploadWeight: parts do not fill the shape");
  if (shape.size() == 3 && experts_k_major_) {
    // The transposed stack reads every part in each block: the parts are read at the end.
    DeviceTensor t = UploadExpertStack(parts, std::move(shape));
    if (part_read)
      for (size_t i = 0; i < parts.size(); ++i) part_read(i);
    return t;
  }
  DeviceTensor t = Alloc(DType::kF32, std::move(shape));
  float* dst = t.data<float>();
  constexpr int64_t kChunk = 1 << 18;
  for (size_t i = 0; i < parts.size(); ++i) {
    const TensorView& p = parts[i];
    const int64_t n = p.numel();
    k::ParallelFor((n + kChunk - 1) / kChunk, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
        ConvertToF32(p, begin, len, dst + begin);
      }
    });
    dst += n;
    if (part_read) part_read(i);
  }
  weight_bytes_ += t.bytes();
  return t;
}

StepMetadata CpuDevice::PrepareStep(const ForwardBatch& b, int64_t page_size,
                                    std::span<const float> rope_cos,
                                    std::span<const float> rope_sin, int64_t rotary_dim) {
  return UploadStepMetadata(*this, b, page_size, rope_cos, rope_sin, rotary_dim);
}

// [experts, n, k] stored as [experts, k, n]: blocks of 32 source rows are converted into a
// scratch and written transposed, in parallel over (expert, block); no whole-tensor copy.
DeviceTensor CpuDevice::UploadExpertStack(std::span<const TensorView> parts, Shape shape) {
  DeviceTensor t = Alloc(DType::kF32, std::move(shape));
  static_cast<HostBuffer*>(t.buffer.get())->k_major_experts = true;
  const int64_t E = t.dim(0), N = t.dim(1), K = t.dim(2);
  constexpr int64_t kBlock = 32;
  const int64_t blocks = (N + kBlock - 1) / kBlock;
  float* dst = t.data<float>();
  k::ParallelFor(E * blocks, 1, [&](int64_t b, int64_t e) {
    std::vector<float> scratch(kBlock * K);
    for (int64_t task = b; task < e; ++task) {
      const int64_t ex = task / blocks, r0 = (task % blocks) * kBlock;
      const int64_t rows = std::min(kBlock, N - r0);
      ConvertConcatRange(parts, (ex * N + r0) * K, rows * K, scratch.data());
      float* out = dst + ex * K * N + r0;
      for (int64_t c = 0; c < K; ++c)
        for (int64_t r = 0; r < rows; ++r) out[c * N + r] = scratch[r * K + c];
    }
  });
  weight_bytes_ += t.bytes();
  return t;
}

void CpuDevice::SampleRows(const DeviceTensor& logits, std::span<const SampleRow> rows,
                           std::vector<SampledToken>& out) {
  const int64_t n = static_cast<int64_t>(rows.size());
  out.clear();
  if (n == 0) return;
  Check(logits.dtype == DType::kF32 && logits.shape.size() == 2 && logits.shape[0] == n,
        "SampleRows: logits must be f32 [rows, vocab]");
  const int64_t vocab = logits.shape[1];
  // The host sampler's scratch is vocabulary-sized: kept between steps.
  if (!sampler_ || sampler_->vocab() != vocab) sampler_ = std::make_unique<BatchSampler>(vocab);
  sampler_->Sample(logits.data<float>(), rows, out);
}

std::unique_ptr<Device> MakeCpuDevice() {
  return std::make_unique<CpuDevice>();
}

}  // namespace m3::engine::backend
