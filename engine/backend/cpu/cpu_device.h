// The CPU device: host memory, float32 weights and activations; no step workspace and no
// recorded steps (every op runs when issued), sampling on the host's BatchSampler. Its op sets
// run on kernels/cpu (cpu_m3_ops.h).
//
// Expert stacks (the rank-3 weights, [experts, n, k]) are stored K-major, each expert's matrix
// transposed to [k, n], converted and transposed in one pass at load: the grouped expert MLPs
// of a decode step have a few rows per expert, and the small-M kernel that serves them streams
// a K-major weight with no per-call packing (kernels/cpu/small_m_gemm.h). Buffers in that layout
// are marked (host_buffer.h), so Upload / Download of them still speak the row-major
// [experts, n, k] layout of the interface. M3_CPU_SMALL_M=0 keeps the nn.Linear layout and the
// per-expert sgemm path (for side-by-side measurement).
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/device.h"

namespace m3::engine::backend {

class CpuDevice final : public Device {
 public:
  CpuDevice();
  std::string name() const override { return "cpu"; }
  DType activation_dtype() const override { return DType::kF32; }
  DType weight_dtype() const override { return DType::kF32; }
  size_t weight_bytes() const override { return weight_bytes_; }
  size_t allocated_bytes() const override { return *live_; }

  DeviceTensor Alloc(DType dtype, Shape shape) override;
  void Upload(const void* host, const DeviceTensor& dst) override;
  void Download(const DeviceTensor& src, void* host) override;
  DeviceTensor UploadWeight(std::span<const TensorView> parts, Shape shape,
                            const PartRead& part_read = nullptr) override;

  StepMetadata PrepareStep(const ForwardBatch& b, int64_t page_size,
                           std::span<const float> rope_cos, std::span<const float> rope_sin,
                           int64_t rotary_dim) override;

  void SampleRows(const DeviceTensor& logits, std::span<const SampleRow> rows,
                  std::vector<SampledToken>& out) override;

 private:
  DeviceTensor UploadExpertStack(std::span<const TensorView> parts, Shape shape);

  std::shared_ptr<std::atomic<size_t>> live_ = std::make_shared<std::atomic<size_t>>(0);
  size_t weight_bytes_ = 0;
  bool experts_k_major_;  // M3_CPU_SMALL_M (kernels/cpu/small_m_gemm.h)
  std::unique_ptr<BatchSampler> sampler_;
};

std::unique_ptr<Device> MakeCpuDevice();

}  // namespace m3::engine::backend
