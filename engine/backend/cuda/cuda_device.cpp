// The CUDA device: device checks at construction, a context (stream, cuBLAS handle, live-bytes
// counter) shared by every buffer so buffers may outlive the device object (encoder cache
// entries), activations from the step workspace between BeginStep and EndStep (one cudaMalloc
// sized by the runner; stream-ordered allocation outside steps and beyond it), CUDA graph
// recording of steps (cuda_graph.h), cudaMalloc for weights, weight upload through two pinned
// staging buffers filled by several threads, dummy weights drawn in place (kernels/cuda/
// random_fill.cuh), and the op scratch its op sets share.
#include "engine/backend/cuda/cuda_device.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_checks.h"
#include "engine/backend/cuda/cuda_graph.h"
#include "engine/backend/cuda/cuda_sampling.h"
#include "engine/backend/step_metadata_upload.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/random_fill.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/qk_norm_rope.cuh"
#include "kernels/cuda/random_fill.cuh"
#include "shared/log.h"

namespace m3::engine::backend {
namespace {

namespace k = m3::kernels::cuda;
using namespace cuda_checks;

// The CUDA runtime's current device is per host thread: the runner is loaded on one thread
// and stepped on another (the engine loop), so every entry point makes its device current.
// The runtime is asked each time (a cheap host call) rather than a per-thread cache trusted:
// other libraries switch devices too (ncclCommInitAll visits every GPU of the group).
bool TryBindDevice(int device) noexcept {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return true;
  if (cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}
void BindDevice(int device) {
  if (!TryBindDevice(device))
    throw Error(ErrorCode::kInternal, "cuda backend: cannot select cuda:" + std::to_string(device));
}

// What every buffer needs after the device object is gone.
struct Context {
  int device = 0;
  std::string name;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  void* blas_workspace = nullptr;
  std::atomic<size_t> live{0};
  ~Context() {
    TryBindDevice(device);
    if (stream) cudaStreamSynchronize(stream);
    if (blas) cublasDestroy(blas);
    if (blas_workspace) cudaFree(blas_workspace);
    if (stream) cudaStreamDestroy(stream);
  }
};

class CudaBuffer : public DeviceBuffer {
 public:
  // persistent: cudaMalloc (weights); otherwise stream-ordered from the device's pool.
  CudaBuffer(size_t bytes, bool persistent, std::shared_ptr<Context> ctx)
      : bytes_(bytes), persistent_(persistent), ctx_(std::move(ctx)) {
    BindDevice(ctx_->device);
    const size_t n = std::max<size_t>(bytes, 1);
    const cudaError_t e =
        persistent ? cudaMalloc(&data_, n) : cudaMallocAsync(&data_, n, ctx_->stream);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free allocation error
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw Error(ErrorCode::kResourceExhausted,
                  "out of GPU memory on " + ctx_->name + " allocating " + MiB(bytes) + " (" +
                      MiB(free_b) + " free of " + MiB(total_b) + ", " + MiB(ctx_->live) +
                      " held by this engine): " + cudaGetErrorString(e));
    }
    ctx_->live += bytes_;
  }
  ~CudaBuffer() override {
    TryBindDevice(ctx_->device);
    if (persistent_)
      cudaFree(data_);
    else
      cudaFreeAsync(data_, ctx_->stream);
    ctx_->live -= bytes_;
  }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
  bool persistent_;
  std::shared_ptr<Context> ctx_;
};

class GpuDevice final : public CudaDevice {
 public:
  explicit GpuDevice(int device) : ctx_(std::make_shared<Context>()) {
    ctx_->device = device;
    ctx_->name = "cuda:" + std::to_string(device);
    BindDevice(device);
    CudaCheck(cudaStreamCreateWithFlags(&ctx_->stream, cudaStreamNonBlocking), "stream");
    Require(cublasCreate(&ctx_->blas) == CUBLAS_STATUS_SUCCESS, ErrorCode::kUnavailable,
            "cuBLAS could not be initialized on " + ctx_->name);
    cublasSetStream(ctx_->blas, ctx_->stream);
    // cuBLAS's own workspace, fixed: a GEMM recorded into a CUDA graph keeps the address it
    // was captured with, so it must not come from a per-call allocation.
    CudaCheck(cudaMalloc(&ctx_->blas_workspace, kBlasWorkspaceBytes), "cuBLAS workspace");
    Require(cublasSetWorkspace(ctx_->blas, ctx_->blas_workspace, kBlasWorkspaceBytes) ==
                CUBLAS_STATUS_SUCCESS,
            ErrorCode::kUnavailable, "cuBLAS workspace could not be set on " + ctx_->name);
    // Activation buffers come and go every step: keep freed pool memory for reuse.
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
      uint64_t keep = UINT64_MAX;
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
  }
  ~GpuDevice() override { ReleaseStaging(); }

  std::string name() const override { return ctx_->name; }
  DType activation_dtype() const override { return DType::kBF16; }
  DType weight_dtype() const override { return DType::kBF16; }
  size_t weight_bytes() const override { return weight_bytes_; }
  size_t allocated_bytes() const override { return ctx_->live; }
  cudaStream_t stream() const override { return S(); }
  cublasHandle_t blas() const override { return ctx_->blas; }

  DeviceTensor Alloc(DType dtype, Shape shape) override {
    if (in_step_ && workspace_) {
      DeviceTensor t;
      t.dtype = dtype;
      t.shape = std::move(shape);
      const size_t need = (std::max<size_t>(t.bytes(), 1) + 255) / 256 * 256;
      if (workspace_used_ + need <= workspace_->bytes()) {
        t.buffer = workspace_;
        t.offset = workspace_used_;
        workspace_used_ += need;
        return t;
      }
      // A recorded step may not allocate (its addresses are replayed): the workspace sizing is
      // wrong, a bug. An eager step still runs, on stream-ordered allocations.
      Check(!recording_, "the step workspace is too small for a recorded step");
      if (!workspace_overflow_logged_)
        Log(LogLevel::kWarn, "cuda backend: a step needs more than the ", MiB(workspace_->bytes()),
            " step workspace; allocating beyond it");
      workspace_overflow_logged_ = true;
      return Make(t.dtype, std::move(t.shape), false);
    }
    return Make(dtype, std::move(shape), false);
  }

  void ReserveStepWorkspace(size_t bytes) override {
    workspace_.reset();
    if (bytes == 0) return;
    workspace_ = std::make_shared<CudaBuffer>(bytes, true, ctx_);
    Log(LogLevel::kInfo, "cuda backend: ", MiB(bytes), " step workspace on ", ctx_->name);
  }
  void BeginStep(size_t from = 0) override {
    in_step_ = true;
    workspace_used_ = (from + 255) / 256 * 256;
  }
  void EndStep() override { in_step_ = false; }
  size_t StepWorkspaceUsed() const override { return workspace_used_; }
  std::unique_ptr<StepGraph> Record(const std::function<void()>& ops) override {
    ReleaseStaging();
    recording_ = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{recording_};
    return CaptureCudaGraph(S(), ops);
  }

  void Upload(const void* host, const DeviceTensor& dst) override {
    if (dst.numel() == 0) return;
    if (dst.dtype == DType::kBF16) {
      DeviceTensor tmp = Alloc(DType::kF32, dst.shape);
      CudaCheck(cudaMemcpyAsync(tmp.data<void>(), host, tmp.bytes(), cudaMemcpyHostToDevice, S()),
                "upload");
      Run("Upload", [&] {
        k::ConvertFloats(tmp.data<void>(), ElemType::kF32, dst.data<void>(), ElemType::kBF16,
                         dst.numel(), S());
      });
    } else {
      CudaCheck(cudaMemcpyAsync(dst.data<void>(), host, dst.bytes(), cudaMemcpyHostToDevice, S()),
                "upload");
    }
  }
  void Download(const DeviceTensor& src, void* host) override {
    if (src.numel() == 0) return;
    if (src.dtype == DType::kBF16) {
      DeviceTensor tmp = Alloc(DType::kF32, src.shape);
      Run("Download", [&] {
        k::ConvertFloats(src.data<void>(), ElemType::kBF16, tmp.data<void>(), ElemType::kF32,
                         src.numel(), S());
      });
      CudaCheck(cudaMemcpyAsync(host, tmp.data<void>(), tmp.bytes(), cudaMemcpyDeviceToHost, S()),
                "download");
    } else {
      CudaCheck(cudaMemcpyAsync(host, src.data<void>(), src.bytes(), cudaMemcpyDeviceToHost, S()),
                "download");
    }
    CudaCheck(cudaStreamSynchronize(S()), "download");
  }

  DeviceTensor UploadWeight(std::span<const TensorView> parts, Shape shape,
                            const PartRead& part_read = nullptr) override {
    int64_t total = 0;
    for (const auto& p : parts) total += p.numel();
    Check(total == NumElements(shape), "UploadWeight: parts do not fill the shape");
    // Matrices (GEMM operands, embeddings) in bf16; vectors (norm weights, biases, the router
    // bias) in f32, where the kernels apply them.
    const DType dt = shape.size() >= 2 ? DType::kBF16 : DType::kF32;
    DeviceTensor t = Make(dt, std::move(shape), true);
    EnsureStaging();
    size_t dst_offset = 0;  // elements
    for (size_t i = 0; i < parts.size(); ++i) {
      const TensorView& p = parts[i];
      const ElemType st = ToElem(p.dtype);
      const size_t esize = DTypeSize(p.dtype);
      const size_t per_chunk = kStagingBytes / esize;
      const size_t n = static_cast<size_t>(p.numel());
      for (size_t begin = 0; begin < n; begin += per_chunk) {
        const size_t len = std::min(per_chunk, n - begin);
        const int b = next_staging_;
        next_staging_ ^= 1;
        CudaCheck(cudaEventSynchronize(staging_done_[b]), "weight staging");
        // Several threads read the (mmapped) checkpoint into the pinned buffer, so page faults
        // and copies overlap; the previous chunk's transfer and conversion run meanwhile.
        const uint8_t* from = p.data + begin * esize;
        uint8_t* to = static_cast<uint8_t*>(pinned_[b]);
        const int64_t bytes = static_cast<int64_t>(len * esize);
        constexpr int64_t kPiece = int64_t{1} << 20;
        kernels::cpu::ParallelFor((bytes + kPiece - 1) / kPiece, 1, [&](int64_t lo, int64_t hi) {
          const int64_t first = lo * kPiece, last = std::min(bytes, hi * kPiece);
          std::memcpy(to + first, from + first, static_cast<size_t>(last - first));
        });
        CudaCheck(cudaMemcpyAsync(device_staging_[b], pinned_[b], len * esize,
                                  cudaMemcpyHostToDevice, S()),
                  "weight upload");
        Run("UploadWeight", [&] {
          k::ConvertFloats(device_staging_[b], st,
                           t.data<uint8_t>() + (dst_offset + begin) * DTypeSize(dt),
                           dt == DType::kBF16 ? ElemType::kBF16 : ElemType::kF32,
                           static_cast<int64_t>(len), S());
        });
        CudaCheck(cudaEventRecord(staging_done_[b], S()), "weight staging");
      }
      dst_offset += n;
      // Its bytes are in the pinned buffers now.
      if (part_read) part_read(i);
    }
    weight_bytes_ += t.bytes();
    return t;
  }

  // Block-scaled Linears stay quantized (linear_weight.h's layout, the kernels of
  // kernels/cuda/block_scaled_*.cuh read it as it is): the parts' codes and scales are copied
  // byte for byte, concatenated; NVFP4's row_scale holds each row's part global scale.
  LinearWeight UploadQuantizedLinear(WeightFormat format, std::span<const QuantizedPart> parts,
                                     Shape shape) override {
    CheckQuantizedParts(format, parts, shape);
    const bool mx = format == WeightFormat::kMxfp8;
    const int64_t K = shape.back(), N = NumElements(shape) / K;
    LinearWeight lw;
    lw.format = format;
    Shape codes = shape, scales = shape;
    codes.back() = mx ? K : K / 2;
    scales.back() = K / WeightFormatBlock(format);
    lw.w = Make(mx ? DType::kF8E4M3 : DType::kU8, std::move(codes), true);
    lw.scales = Make(mx ? DType::kU8 : DType::kF8E4M3, std::move(scales), true);
    size_t code_at = 0, scale_at = 0;
    std::vector<float> row_scale;
    for (const QuantizedPart& p : parts) {
      CopyBytes(p.codes.data, p.codes.nbytes, lw.w.data<uint8_t>() + code_at);
      CopyBytes(p.scales.data, p.scales.nbytes, lw.scales.data<uint8_t>() + scale_at);
      code_at += p.codes.nbytes;
      scale_at += p.scales.nbytes;
      if (!mx)
        row_scale.insert(row_scale.end(), static_cast<size_t>(p.codes.shape[0]), p.global_scale);
    }
    Check(code_at == lw.w.bytes() && scale_at == lw.scales.bytes(),
          "UploadQuantizedLinear: parts do not fill the shape");
    if (!mx) {
      Shape rows(shape.begin(), shape.end() - 1);
      lw.row_scale = Make(DType::kF32, std::move(rows), true);
      Check(static_cast<int64_t>(row_scale.size()) == N, "UploadQuantizedLinear: row scales");
      Upload(row_scale.data(), lw.row_scale);
      CudaCheck(cudaStreamSynchronize(S()), "row scale upload");
    }
    weight_bytes_ += lw.bytes();
    return lw;
  }

  // Dummy weights drawn in place (kernels/cuda/random_fill.cuh), stored as UploadWeight and the
  // quantized uploads store them: matrices bf16, vectors f32; block-scaled Linears in the
  // canonical layout of linear_weight.h.
  DeviceTensor DummyWeight(Shape shape, float mean, float std, uint64_t seed) override {
    const DType dt = shape.size() >= 2 ? DType::kBF16 : DType::kF32;
    DeviceTensor t = Make(dt, std::move(shape), true);
    Run("DummyWeight", [&] {
      k::RandomNormalFill(seed, mean, std, t.numel(), t.data<void>(),
                          dt == DType::kBF16 ? ElemType::kBF16 : ElemType::kF32, S());
    });
    weight_bytes_ += t.bytes();
    return t;
  }
  LinearWeight DummyLinear(WeightFormat format, Shape shape, float std, uint64_t seed) override {
    if (format == WeightFormat::kDense)
      return LinearWeight(DummyWeight(std::move(shape), 0, std, seed));
    const int64_t block = WeightFormatBlock(format);
    Require(shape.size() >= 2 && shape.back() > 0 && shape.back() % block == 0,
            ErrorCode::kInternal,
            "DummyLinear: a " + std::string(WeightFormatName(format)) +
                " Linear needs K a multiple of " + std::to_string(block));
    const int64_t K = shape.back(), rows = NumElements(shape) / K;
    const bool mx = format == WeightFormat::kMxfp8;
    // The layout UploadQuantizedLinear keeps a checkpoint's Linears in.
    Shape codes = shape, scales = shape, row_scale(shape.begin(), shape.end() - 1);
    codes.back() = mx ? K : K / 2;
    scales.back() = K / block;
    LinearWeight L;
    L.format = format;
    L.w = Make(mx ? DType::kF8E4M3 : DType::kU8, std::move(codes), true);
    L.scales = Make(mx ? DType::kU8 : DType::kF8E4M3, std::move(scales), true);
    if (!mx) L.row_scale = Make(DType::kF32, std::move(row_scale), true);
    Run("DummyLinear", [&] {
      if (mx)
        k::RandomMxfp8Fill(seed, std, 0, rows, K, L.w.data<uint8_t>(), L.scales.data<uint8_t>(),
                           S());
      else
        k::RandomNvfp4Fill(seed, std, kernels::cpu::DummyNvfp4GlobalScale(std), 0, rows, K,
                           L.w.data<uint8_t>(), L.scales.data<uint8_t>(), L.row_scale.data<float>(),
                           S());
    });
    weight_bytes_ += L.bytes();
    return L;
  }

  StepMetadata PrepareStep(const ForwardBatch& b, int64_t page_size,
                           std::span<const float> rope_cos, std::span<const float> rope_sin,
                           int64_t rotary_dim) override {
    ReleaseStaging();  // loading is over once steps run
    return UploadStepMetadata(*this, b, page_size, rope_cos, rope_sin, rotary_dim);
  }
  StepMetadata PrepareStepFromPositions(const ForwardBatch& b, int64_t page_size,
                                        std::span<const float> inv_freq) override {
    ReleaseStaging();
    StepMetadata m = UploadStepLayout(*this, b, page_size);
    const int64_t half = static_cast<int64_t>(inv_freq.size());
    // The frequencies stay on the device, uploaded once: a step uploads only its layout (a
    // one-row step paid as much again for an upload of 32 floats).
    if (!std::equal(inv_freq.begin(), inv_freq.end(), rope_freqs_host_.begin(),
                    rope_freqs_host_.end())) {
      rope_freqs_ = Make(DType::kF32, {half}, true);
      Upload(inv_freq.data(), rope_freqs_);
      rope_freqs_host_.assign(inv_freq.begin(), inv_freq.end());
    }
    m.rope_cos = Alloc(DType::kF32, {m.rows, 2 * half});
    m.rope_sin = Alloc(DType::kF32, {m.rows, 2 * half});
    Run("RopeTables", [&] {
      k::RopeTables(m.positions.data<int32_t>(), m.rows, rope_freqs_.data<float>(), half,
                    m.rope_cos.data<float>(), m.rope_sin.data<float>(), S());
    });
    return m;
  }

  void SampleRows(const DeviceTensor& logits, std::span<const SampleRow> rows,
                  std::vector<SampledToken>& out) override {
    CudaSampleRows(*this, S(), logits, rows, out);
  }

  void* OpScratch(size_t bytes) override {
    if (bytes == 0) return nullptr;
    if (!op_scratch_ || op_scratch_->bytes() < bytes) {
      Check(!recording_, "op scratch too small for a recorded step");
      if (op_scratch_) retired_scratch_.push_back(op_scratch_);
      op_scratch_ = std::make_shared<CudaBuffer>((bytes + bytes / 4 + 255) / 256 * 256, true, ctx_);
      Log(LogLevel::kInfo, "cuda backend: op scratch of ", MiB(op_scratch_->bytes()), " on ",
          ctx_->name);
    }
    return op_scratch_->data();
  }

 private:
  static constexpr size_t kStagingBytes = size_t{32} << 20;
  static constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;  // cuBLAS's advice for Hopper

  cudaStream_t S() const {
    BindDevice(ctx_->device);
    return ctx_->stream;
  }

  DeviceTensor Make(DType dtype, Shape shape, bool persistent) {
    DeviceTensor t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.buffer = std::make_shared<CudaBuffer>(t.bytes(), persistent, ctx_);
    return t;
  }

  // bytes from host memory (mmapped) to device memory through the pinned staging buffers, as
  // UploadWeight moves its chunks, without conversion.
  void CopyBytes(const uint8_t* from, size_t bytes, uint8_t* to) {
    EnsureStaging();
    for (size_t begin = 0; begin < bytes; begin += kStagingBytes) {
      const size_t len = std::min(kStagingBytes, bytes - begin);
      const int b = next_staging_;
      next_staging_ ^= 1;
      CudaCheck(cudaEventSynchronize(staging_done_[b]), "weight staging");
      uint8_t* pinned = static_cast<uint8_t*>(pinned_[b]);
      const int64_t n = static_cast<int64_t>(len);
      constexpr int64_t kPiece = int64_t{1} << 20;
      kernels::cpu::ParallelFor((n + kPiece - 1) / kPiece, 1, [&](int64_t lo, int64_t hi) {
        const int64_t first = lo * kPiece, last = std::min(n, hi * kPiece);
        std::memcpy(pinned + first, from + begin + first, static_cast<size_t>(last - first));
      });
      CudaCheck(cudaMemcpyAsync(to + begin, pinned, len, cudaMemcpyHostToDevice, S()),
                "weight upload");
      CudaCheck(cudaEventRecord(staging_done_[b], S()), "weight staging");
    }
  }

  void EnsureStaging() {
    if (pinned_[0]) return;
    for (int i = 0; i < 2; ++i) {
      CudaCheck(cudaHostAlloc(&pinned_[i], kStagingBytes, cudaHostAllocDefault),
                "pinned staging buffer");
      CudaCheck(cudaMalloc(&device_staging_[i], kStagingBytes), "device staging buffer");
      CudaCheck(cudaEventCreateWithFlags(&staging_done_[i], cudaEventDisableTiming),
                "staging event");
    }
  }
  void ReleaseStaging() {
    if (!pinned_[0]) return;
    cudaStreamSynchronize(S());
    for (int i = 0; i < 2; ++i) {
      cudaFreeHost(pinned_[i]);
      cudaFree(device_staging_[i]);
      cudaEventDestroy(staging_done_[i]);
      pinned_[i] = nullptr;
      device_staging_[i] = nullptr;
    }
  }

  std::shared_ptr<Context> ctx_;
  size_t weight_bytes_ = 0;
  void* pinned_[2] = {nullptr, nullptr};
  void* device_staging_[2] = {nullptr, nullptr};
  cudaEvent_t staging_done_[2] = {nullptr, nullptr};
  int next_staging_ = 0;
  std::shared_ptr<CudaBuffer> workspace_;  // the step workspace (ReserveStepWorkspace)
  std::shared_ptr<CudaBuffer> op_scratch_;
  std::vector<std::shared_ptr<CudaBuffer>> retired_scratch_;
  DeviceTensor rope_freqs_;             // PrepareStepFromPositions' inverse frequencies
  std::vector<float> rope_freqs_host_;  // what rope_freqs_ holds
  size_t workspace_used_ = 0;
  bool in_step_ = false, recording_ = false, workspace_overflow_logged_ = false;
};

}  // namespace

namespace {

// The GPU index of "cuda" (0) or "cuda:N".
int CudaIndex(const std::string& device) {
  if (device == "cuda") return 0;
  const std::string prefix = "cuda:";
  bool ok = device.rfind(prefix, 0) == 0 && device.size() > prefix.size() &&
            device.size() <= prefix.size() + 3;
  for (size_t i = prefix.size(); ok && i < device.size(); ++i)
    ok = device[i] >= '0' && device[i] <= '9';
  Require(ok, ErrorCode::kInvalidArgument,
          "device '" + device + "' is not 'cuda' or 'cuda:N' (N a GPU index)");
  return std::stoi(device.substr(prefix.size()));
}

}  // namespace

CudaMemory CudaMemoryInfo(const std::string& device) {
  BindDevice(CudaIndex(device));
  size_t free_b = 0, total_b = 0;
  CudaCheck(cudaMemGetInfo(&free_b, &total_b), "reading the free memory of " + device);
  return {free_b, total_b};
}

void* CudaDeviceStream(Device& device) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  Require(cuda != nullptr, ErrorCode::kInvalidArgument,
          "backend " + device.name() + " is not a CUDA backend");
  return cuda->stream();
}

std::unique_ptr<Device> MakeCudaDevice(const std::string& device) {
  const int index = CudaIndex(device);
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    const bool no_driver = e != cudaErrorNoDevice;
    throw Error(ErrorCode::kUnavailable,
                std::string(no_driver ? "no usable CUDA driver" : "no CUDA GPU") +
                    " for --device " + device + ": " + cudaGetErrorString(e));
  }
  Require(count > 0, ErrorCode::kUnavailable, "no CUDA GPU for --device " + device);
  Require(index < count, ErrorCode::kInvalidArgument,
          "device '" + device + "': only " + std::to_string(count) + " CUDA GPU(s) present");
  cudaDeviceProp prop{};
  CudaCheck(cudaGetDeviceProperties(&prop, index), "reading the properties of " + device);
  Require(prop.major >= 9, ErrorCode::kUnsupported,
          "GPU " + std::to_string(index) + " (" + prop.name + ", compute capability " +
              std::to_string(prop.major) + "." + std::to_string(prop.minor) +
              ") is not supported: this build has code for compute capability 9.0 (Hopper)");
  return std::make_unique<GpuDevice>(index);
}

}  // namespace m3::engine::backend
