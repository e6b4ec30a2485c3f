// Device: what every model graph needs from the machine it runs on, whatever its ops: memory
// (allocation, host <-> device copies, weight upload with dtype conversion), the step workspace,
// recording a step's ops into a replayable StepGraph, the per-step metadata (PrepareStep) and
// sampling the next tokens where the logits lie. The ops of one model family are a separate
// interface over a Device (m3_ops.h for MiniMax-M3), so a new model family adds an op set and a
// new device adds a Device and the op sets' implementations on it: added files, no edits here.
// The CPU device (cpu/cpu_device.h) is host memory; the CUDA device (cuda/cuda_device.h) one GPU.
//
// Shapes are row-major; activations are in activation_dtype() (float32 on the CPU).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/device_tensor.h"
#include "engine/backend/linear_weight.h"
#include "engine/backend/quantized_parts.h"
#include "engine/backend/step_metadata.h"
#include "engine/step/batch_sampler.h"
#include "engine/step/forward_batch.h"
#include "shared/tensor.h"

namespace m3::engine::backend {

// A recorded sequence of ops that replays as one launch (a CUDA graph): it reads and writes the
// same buffers every time, so the caller rewrites its input buffers before each Replay.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  virtual void Replay() = 0;
  // The operations recorded (kernels, copies, ...: a CUDA graph's nodes), for benchmarks that
  // count a step's launches; 0 where unknown.
  virtual int64_t operations() const { return 0; }
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;        // "cpu"
  virtual DType activation_dtype() const = 0;  // float32 on the CPU
  virtual DType weight_dtype() const = 0;      // what UploadWeight stores
  virtual size_t weight_bytes() const = 0;     // uploaded so far
  virtual size_t allocated_bytes() const = 0;  // live buffers, weights included

  // ---- memory ----
  virtual DeviceTensor Alloc(DType dtype, Shape shape) = 0;            // contents undefined
  virtual void Upload(const void* host, const DeviceTensor& dst) = 0;  // dst.bytes() bytes
  virtual void Download(const DeviceTensor& src, void* host) = 0;
  // Weight upload with conversion from the checkpoint dtype (any float dtype): the parts,
  // concatenated along dimension 0, form `shape` (gate/up fusion, expert stacking). Reads the
  // (mmapped) views once; no intermediate copy.
  // part_read(i), when given, is called as soon as part i's host bytes have been read (before
  // the upload returns), so a loader can drop their pages at once: the parts of a stacked
  // tensor (128 experts of bf16 are ~10 GB) need not all be resident together.
  using PartRead = std::function<void(size_t part)>;
  virtual DeviceTensor UploadWeight(std::span<const TensorView> parts, Shape shape,
                                    const PartRead& part_read = nullptr) = 0;
  // A block-scaled Linear (linear_weight.h), its parts concatenated along dimension 0 into the
  // dequantized `shape`: a device with kernels for `format` keeps it quantized (no dense copy);
  // this default dequantizes on the host to float32 and uploads that as a dense weight.
  virtual LinearWeight UploadQuantizedLinear(WeightFormat format,
                                             std::span<const QuantizedPart> parts, Shape shape);

  // ---- dummy weights (--load-format dummy: serving and timing without the files) ----
  // A weight of `shape` drawn from normal(mean, std) by `seed` (std 0: every element `mean`),
  // stored as UploadWeight stores it. A Linear in `format` (the dequantized `shape`) whose
  // codes and scales are chosen so the dequantized values have that spread around 0. These
  // defaults draw on the host and upload; GPU devices draw in place (a full-size model's
  // hundreds of GB would take minutes through the host).
  virtual DeviceTensor DummyWeight(Shape shape, float mean, float std, uint64_t seed);
  virtual LinearWeight DummyLinear(WeightFormat format, Shape shape, float std, uint64_t seed);

  // ---- step workspace and recorded steps (the defaults: none; GPU devices implement them) ----
  // Reserves `bytes` of scratch once; between BeginStep and EndStep, Alloc hands out pieces of
  // it (from offset `from` on, reset at each BeginStep) instead of allocating, so tensors made
  // in a step must not outlive it. StepWorkspaceUsed: the offset the step has reached (a
  // recorded graph's outputs lie below it, so work after its replay starts there).
  virtual void ReserveStepWorkspace(size_t /*bytes*/) {}
  virtual void BeginStep(size_t /*from*/ = 0) {}
  virtual void EndStep() {}
  virtual size_t StepWorkspaceUsed() const { return 0; }
  // Records `ops` (issued between BeginStep and EndStep, nothing run) into a graph; null when
  // this device cannot record or the ops cannot be recorded (a host synchronization inside).
  virtual std::unique_ptr<StepGraph> Record(const std::function<void()>& /*ops*/) {
    return nullptr;
  }

  // ---- step metadata ----
  // Built once per step: uploads the batch layout and the text rotary rows
  // (cos/sin host arrays [rows, rotary_dim]).
  virtual StepMetadata PrepareStep(const ForwardBatch& batch, int64_t page_size,
                                   std::span<const float> rope_cos, std::span<const float> rope_sin,
                                   int64_t rotary_dim) = 0;
  // The same, with the rotary rows made from the batch's positions and the rotary inverse
  // frequencies (rotary_dim = 2 * inv_freq.size()) as kernels/cpu/rope.h's RopeCosSin does:
  // here on the host's threads, on the device where a device can (an 8K-token prefill's tables
  // are 4 MB to compute and upload).
  virtual StepMetadata PrepareStepFromPositions(const ForwardBatch& batch, int64_t page_size,
                                                std::span<const float> inv_freq);

  // ---- sampling ----
  // The next token of each row of logits (f32 [rows.size(), vocab]) with rows[i]'s parameters
  // and history, as BatchSampler picks it (the draw CounterUniform(seed, output size)), with
  // the logprobs it asks for; only these come back to the host, never the logits. This default
  // downloads the logits and samples them on the host (devices with a sampler override).
  virtual void SampleRows(const DeviceTensor& logits, std::span<const SampleRow> rows,
                          std::vector<SampledToken>& out) {
    out.clear();
    if (rows.empty()) return;
    std::vector<float> host(static_cast<size_t>(logits.numel()));
    Download(logits, host.data());
    BatchSampler(logits.numel() / static_cast<int64_t>(rows.size())).Sample(host.data(), rows, out);
  }
};

}  // namespace m3::engine::backend
