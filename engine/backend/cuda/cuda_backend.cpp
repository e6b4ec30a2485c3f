// CudaBackend: device checks at construction, a context (stream, cuBLAS handle, live-bytes
// counter) shared by every buffer so buffers may outlive the backend object (encoder cache
// entries), activations from the step workspace between BeginStep and EndStep (one cudaMalloc
// sized by the runner; stream-ordered allocation outside steps and beyond it), CUDA graph
// recording of steps (cuda_graph.h), cudaMalloc for weights, weight upload
// through two pinned staging buffers filled by several threads, and shape checks before each kernel
// (kInternal: a bug).
#include "engine/backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_graph.h"
#include "engine/backend/cuda/cuda_sampling.h"
#include "engine/backend/step_metadata_upload.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/layer_norm.cuh"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/moe_experts.cuh"
#include "kernels/cuda/moe_routing.cuh"
#include "kernels/cuda/msa_index_fp8.cuh"
#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/paged_msa_attention.cuh"
#include "kernels/cuda/paged_msa_indexer.cuh"
#include "kernels/cuda/qk_norm_rope.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/segment_attention.cuh"
#include "kernels/cuda/swiglu.cuh"
#include "shared/log.h"

namespace m3::engine::backend {
namespace {

namespace k = m3::kernels::cuda;
using k::bf16;
using k::ElemType;

void Check(bool ok, const char* what) {
  Require(ok, ErrorCode::kInternal, std::string("cuda backend: ") + what);
}

void CudaCheck(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw Error(ErrorCode::kInternal, "cuda backend: " + what + ": " + cudaGetErrorString(e));
}

std::string MiB(size_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

ElemType ToElem(DType t) {
  switch (t) {
    case DType::kF32:
      return ElemType::kF32;
    case DType::kF16:
      return ElemType::kF16;
    case DType::kBF16:
      return ElemType::kBF16;
    case DType::kF64:
      return ElemType::kF64;
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  "weight dtype " + std::string(DTypeName(t)) + " is not a float type");
  }
}

// Runs the kernels' own failures (std::runtime_error) through the engine's error type.
template <typename Fn>
void Run(const char* op, Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInternal, std::string("cuda backend ") + op + ": " + e.what());
  }
}

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

// What every buffer needs after the backend object is gone.
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

k::PagedLayout Layout(const StepMetadata& m) {
  return {m.seqs,
          m.rows,
          m.query_start.data<int32_t>(),
          m.context_lens.data<int32_t>(),
          m.block_tables.data<int32_t>(),
          m.max_pages_per_seq,
          m.page_size,
          m.num_decodes};
}

bool IsFloatActivation(DType t) {
  return t == DType::kBF16 || t == DType::kF32;
}

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int device) : ctx_(std::make_shared<Context>()) {
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
  ~CudaBackend() override { ReleaseStaging(); }

  std::string name() const override { return ctx_->name; }
  DType activation_dtype() const override { return DType::kBF16; }
  DType weight_dtype() const override { return DType::kBF16; }
  size_t weight_bytes() const override { return weight_bytes_; }
  size_t allocated_bytes() const override { return ctx_->live; }
  cudaStream_t stream() const { return S(); }

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

  DeviceTensor UploadWeight(std::span<const TensorView> parts, Shape shape) override {
    int64_t total = 0;
    for (const auto& p : parts) total += p.numel();
    Check(total == NumElements(shape), "UploadWeight: parts do not fill the shape");
    // Matrices (GEMM operands, embeddings) in bf16; vectors (norm weights, biases, the router
    // bias) in f32, where the kernels apply them.
    const DType dt = shape.size() >= 2 ? DType::kBF16 : DType::kF32;
    DeviceTensor t = Make(dt, std::move(shape), true);
    EnsureStaging();
    size_t dst_offset = 0;  // elements
    for (const auto& p : parts) {
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
    }
    weight_bytes_ += t.bytes();
    return t;
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

  void Embedding(const DeviceTensor& table, const DeviceTensor& ids,
                 const DeviceTensor& out) override {
    const int64_t H = table.dim(1), n = ids.numel();
    Check(out.rows() == n && out.row_elems() == H && out.dtype == table.dtype &&
              ids.dtype == DType::kI32,
          "Embedding shapes");
    Run("Embedding", [&] {
      k::GatherRows(table.data<void>(), H * DTypeSize(table.dtype), ids.data<int32_t>(), n,
                    out.data<void>(), S());
    });
  }
  void CopyRows(const DeviceTensor& src, int64_t src_row, const DeviceTensor& dst, int64_t dst_row,
                int64_t count) override {
    const int64_t w = src.row_elems();
    Check(w == dst.row_elems() && src_row + count <= src.rows() && dst_row + count <= dst.rows(),
          "CopyRows shapes");
    if (count <= 0) return;
    const size_t ss = DTypeSize(src.dtype), ds = DTypeSize(dst.dtype);
    const void* from = src.data<uint8_t>() + src_row * w * ss;
    void* to = dst.data<uint8_t>() + dst_row * w * ds;
    if (src.dtype == dst.dtype) {
      CudaCheck(cudaMemcpyAsync(to, from, count * w * ss, cudaMemcpyDeviceToDevice, S()),
                "CopyRows");
    } else {
      Check(IsFloatActivation(src.dtype) && IsFloatActivation(dst.dtype), "CopyRows dtypes");
      Run("CopyRows", [&] {
        k::ConvertFloats(from, ToElem(src.dtype), to, ToElem(dst.dtype), count * w, S());
      });
    }
  }
  void GatherRows(const DeviceTensor& src, const DeviceTensor& index,
                  const DeviceTensor& out) override {
    const int64_t w = src.row_elems(), n = index.numel();
    Check(out.rows() == n && out.row_elems() == w && out.dtype == src.dtype, "GatherRows shapes");
    Run("GatherRows", [&] {
      k::GatherRows(src.data<void>(), w * DTypeSize(src.dtype), index.data<int32_t>(), n,
                    out.data<void>(), S());
    });
  }
  void AddRmsNorm(const DeviceTensor& residual, const DeviceTensor* delta,
                  const DeviceTensor& weight, float eps, const DeviceTensor& out) override {
    const int64_t dim = weight.numel(), rows = residual.numel() / dim;
    Check(out.numel() == residual.numel() && (!delta || delta->numel() == residual.numel()),
          "AddRmsNorm shapes");
    Check(residual.dtype == DType::kBF16 && out.dtype == DType::kBF16 &&
              (!delta || delta->dtype == DType::kBF16) && weight.dtype == DType::kF32,
          "AddRmsNorm dtypes");
    Run("AddRmsNorm", [&] {
      k::AddRmsNormGemma(residual.data<bf16>(), delta ? delta->data<bf16>() : nullptr, rows, dim,
                         weight.data<float>(), eps, out.data<bf16>(), S());
    });
  }
  void LayerNorm(const DeviceTensor& x, const DeviceTensor& weight, const DeviceTensor& bias,
                 float eps, const DeviceTensor& out) override {
    const int64_t dim = weight.numel(), rows = x.numel() / dim;
    Check(out.numel() == x.numel() && x.dtype == DType::kBF16 && out.dtype == DType::kBF16 &&
              weight.dtype == DType::kF32 && bias.dtype == DType::kF32,
          "LayerNorm shapes");
    Run("LayerNorm", [&] {
      k::LayerNorm(x.data<bf16>(), rows, dim, weight.data<float>(), bias.data<float>(), eps,
                   out.data<bf16>(), S());
    });
  }
  void Add(const DeviceTensor& x, const DeviceTensor& delta) override {
    Check(x.numel() == delta.numel() && x.dtype == DType::kBF16 && delta.dtype == DType::kBF16,
          "Add shapes");
    Run("Add", [&] { k::AddInPlace(x.data<bf16>(), delta.data<bf16>(), x.numel(), S()); });
  }
  void Gelu(const DeviceTensor& x) override {
    Check(x.dtype == DType::kBF16, "Gelu dtype");
    Run("Gelu", [&] { k::GeluErf(x.data<bf16>(), x.numel(), S()); });
  }

  void Linear(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor* bias,
              const DeviceTensor& y) override {
    const int64_t K = w.dim(w.shape.size() - 1), N = w.numel() / K, M = x.numel() / K;
    Check(x.numel() == M * K && y.numel() == M * N && (!bias || bias->numel() == N),
          "Linear shapes");
    Check(w.dtype == DType::kBF16 && IsFloatActivation(x.dtype) && IsFloatActivation(y.dtype) &&
              (!bias || bias->dtype == DType::kF32),
          "Linear dtypes");
    DeviceTensor xb = x;
    if (x.dtype != DType::kBF16) {
      xb = Alloc(DType::kBF16, x.shape);
      Run("Linear", [&] {
        k::ConvertFloats(x.data<void>(), ElemType::kF32, xb.data<void>(), ElemType::kBF16,
                         x.numel(), S());
      });
    }
    Run("Linear", [&] {
      k::Linear(ctx_->blas, xb.data<bf16>(), M, K, w.data<bf16>(), N,
                bias ? bias->data<float>() : nullptr, y.data<void>(), ToElem(y.dtype), S());
    });
  }

  void QkNormRopeToCache(const DeviceTensor& qkv, const QkvLayout& l, const QkNormWeights& w,
                         const StepMetadata& m, const DeviceTensor& q_out,
                         const DeviceTensor* index_q_out, const LayerKvCache& cache) override {
    Check(qkv.numel() == m.rows * l.width(), "QkNormRopeToCache: qkv width");
    Check(m.rope_cos.numel() == m.rows * l.rotary_dim, "QkNormRopeToCache: rotary rows");
    const bool idx = l.index_heads > 0;
    Check(!idx || (index_q_out && (cache.index_k || cache.fp8_index())),
          "QkNormRopeToCache: index outputs");
    Check(qkv.dtype == DType::kBF16 && q_out.dtype == DType::kBF16 &&
              cache.k.dtype == DType::kBF16 && cache.v.dtype == DType::kBF16,
          "QkNormRopeToCache dtypes");
    k::QkNormRopeDims d{l.q_heads,     l.kv_heads,       l.head_dim,         l.rotary_dim,
                        l.index_heads, l.index_head_dim, l.index_rotary_dim, l.eps};
    k::QkNormWeightsPtr p{w.q_norm.data<float>(), w.k_norm.data<float>(),
                          idx ? w.index_q_norm.data<float>() : nullptr,
                          idx ? w.index_k_norm.data<float>() : nullptr};
    // FP8 index keys: the step's keys to a dense scratch buffer, then quantized into their
    // slots (no bf16 index-key pages are kept).
    const bool fp8 = idx && cache.fp8_index();
    d.index_k_by_row = fp8;
    bf16* index_k = nullptr;
    if (fp8)
      index_k = static_cast<bf16*>(
          OpScratch(static_cast<size_t>(m.rows * l.index_head_dim) * sizeof(bf16)));
    else if (idx)
      index_k = cache.index_k.data<bf16>();
    Run("QkNormRopeToCache", [&] {
      k::QkNormRopeToPages(qkv.data<bf16>(), m.rows, d, p, m.rope_cos.data<float>(),
                           m.rope_sin.data<float>(), m.slot_mapping.data<int64_t>(),
                           q_out.data<bf16>(), idx ? index_q_out->data<bf16>() : nullptr,
                           cache.k.data<bf16>(), cache.v.data<bf16>(), index_k, S());
      if (fp8)
        k::QuantizeIndexKeyRowsFp8(
            index_k, m.rows, l.index_head_dim, m.slot_mapping.data<int64_t>(),
            cache.index_codes.data<uint8_t>(), cache.index_scales.data<float>(), S());
    });
  }
  void PagedAttention(const DeviceTensor& q, const LayerKvCache& cache, const StepMetadata& m,
                      const AttentionShape& s, const DeviceTensor& out) override {
    Check(q.dtype == DType::kBF16 && out.dtype == DType::kBF16 && cache.k.dtype == DType::kBF16,
          "PagedAttention dtypes");
    k::AttentionDims dims{s.q_heads, s.kv_heads, s.head_dim, s.scale};
    const k::PagedLayout layout = Layout(m);
    const size_t bytes = k::PagedAttentionWorkspaceBytes(layout, dims, 0);
    const k::AttentionWorkspace ws{OpScratch(bytes), bytes};
    Run("PagedAttention", [&] {
      k::PagedAttention(q.data<bf16>(), cache.k.data<bf16>(), cache.v.data<bf16>(), layout, dims,
                        out.data<bf16>(), S(), ws);
    });
  }
  // The index keys of an MSA layer's cache (bf16 or FP8), its tensors' dtypes checked.
  static k::IndexKeys IndexKeysOf(const DeviceTensor& index_q, const LayerKvCache& cache,
                                  const StepMetadata& m, const MsaParams& p,
                                  const DeviceTensor& selected) {
    Check(selected.numel() == p.index_heads * m.rows * p.topk_blocks, "MSA selection shape");
    const bool fp8 = cache.fp8_index();
    Check(
        index_q.dtype == DType::kBF16 && selected.dtype == DType::kI32 &&
            (fp8 ? cache.index_codes.dtype == DType::kU8 && cache.index_scales.dtype == DType::kF32
                 : cache.index_k.dtype == DType::kBF16),
        "MSA indexer dtypes");
    return fp8 ? k::IndexKeys{nullptr, cache.index_codes.data<uint8_t>(),
                              cache.index_scales.data<float>()}
               : k::IndexKeys{cache.index_k.data<bf16>(), nullptr, nullptr};
  }
  static k::IndexerParams IndexerParamsOf(const MsaParams& p) {
    return {p.index_heads, p.index_head_dim, p.block_size, p.topk_blocks, p.local_blocks};
  }
  void MsaSelectBlocks(const DeviceTensor& index_q, const LayerKvCache& cache,
                       const StepMetadata& m, const MsaParams& p,
                       const DeviceTensor& selected) override {
    const k::IndexKeys keys = IndexKeysOf(index_q, cache, m, p, selected);
    const k::IndexerParams ip = IndexerParamsOf(p);
    const k::PagedLayout layout = Layout(m);
    const size_t bytes = k::IndexerWorkspaceBytes(layout, ip);
    void* ws = OpScratch(bytes);
    Run("MsaSelectBlocks", [&] {
      k::PagedIndexerSelect(index_q.data<bf16>(), keys, layout, ip, m.max_seq_len, ws, bytes,
                            selected.data<int32_t>(), S());
    });
  }
  void MsaAttention(const DeviceTensor& q, const DeviceTensor& index_q, const LayerKvCache& cache,
                    const StepMetadata& m, const MsaParams& p, const AttentionShape& s,
                    const DeviceTensor& selected, const DeviceTensor& out) override {
    const k::IndexKeys keys = IndexKeysOf(index_q, cache, m, p, selected);
    Check(q.dtype == DType::kBF16 && out.dtype == DType::kBF16 && cache.k.dtype == DType::kBF16,
          "MsaAttention dtypes");
    const k::IndexerParams ip = IndexerParamsOf(p);
    const k::AttentionDims dims{s.q_heads, s.kv_heads, s.head_dim, s.scale};
    const k::PagedLayout layout = Layout(m);
    // One scratch: the indexer's workspace, then the attention's (256-byte aligned).
    const size_t index_bytes = (k::IndexerWorkspaceBytes(layout, ip) + 255) / 256 * 256;
    const size_t attn_bytes = k::PagedAttentionWorkspaceBytes(layout, dims, p.topk_blocks);
    auto* ws = static_cast<unsigned char*>(OpScratch(index_bytes + attn_bytes));
    const k::AttentionWorkspace attn_ws{attn_bytes > 0 ? ws + index_bytes : nullptr, attn_bytes};
    Run("MsaAttention", [&] {
      k::PagedMsaAttention(q.data<bf16>(), cache.k.data<bf16>(), cache.v.data<bf16>(),
                           index_q.data<bf16>(), keys, layout, dims, ip, m.max_seq_len, ws,
                           index_bytes, selected.data<int32_t>(), out.data<bf16>(), S(), attn_ws);
    });
  }
  void BlockSparseAttention(const DeviceTensor& q, const LayerKvCache& cache, const StepMetadata& m,
                            const AttentionShape& s, const DeviceTensor& selected, int64_t topk,
                            int64_t block_size, const DeviceTensor& out) override {
    Check(q.dtype == DType::kBF16 && out.dtype == DType::kBF16 && selected.dtype == DType::kI32,
          "BlockSparseAttention dtypes");
    k::AttentionDims dims{s.q_heads, s.kv_heads, s.head_dim, s.scale};
    const k::PagedLayout layout = Layout(m);
    const size_t bytes = k::PagedAttentionWorkspaceBytes(layout, dims, topk);
    const k::AttentionWorkspace ws{OpScratch(bytes), bytes};
    Run("BlockSparseAttention", [&] {
      k::PagedBlockSparseAttention(q.data<bf16>(), cache.k.data<bf16>(), cache.v.data<bf16>(),
                                   layout, dims, selected.data<int32_t>(), topk, block_size,
                                   out.data<bf16>(), S(), ws);
    });
  }

  void SwigluOai(const DeviceTensor& gate_up, const SwigluParams& p,
                 const DeviceTensor& out) override {
    const int64_t I = out.row_elems(), rows = out.rows();
    Check(gate_up.numel() == rows * 2 * I && gate_up.dtype == DType::kBF16 &&
              out.dtype == DType::kBF16,
          "SwigluOai shapes");
    Run("SwigluOai", [&] {
      k::SwigluOai(gate_up.data<bf16>(), rows, I, p.alpha, p.limit, out.data<bf16>(), S());
    });
  }
  void MoeRoute(const DeviceTensor& logits, const DeviceTensor& bias, const DeviceTensor& ids,
                const DeviceTensor& weights, const ExpertRange& local) override {
    const int64_t rows = logits.rows(), E = logits.row_elems(), K = ids.row_elems();
    Check(ids.rows() == rows && weights.numel() == rows * K && ids.dtype == DType::kI32 &&
              IsFloatActivation(logits.dtype) && IsFloatActivation(weights.dtype) &&
              (!bias || (bias.dtype == DType::kF32 && bias.numel() == E)),
          "MoeRoute shapes");
    Run("MoeRoute", [&] {
      k::MoeRouteSigmoid(logits.data<void>(), ToElem(logits.dtype), rows, E,
                         bias ? bias.data<float>() : nullptr, K, ids.data<int32_t>(),
                         weights.data<void>(), ToElem(weights.dtype), S(), local.first,
                         local.count);
    });
  }
  void MoeExperts(const DeviceTensor& x, const DeviceTensor& ids, const DeviceTensor& weights,
                  const DeviceTensor& gate_up, const DeviceTensor& down, const SwigluParams& p,
                  float scale, const DeviceTensor& out) override {
    k::MoeExpertsDims d;
    d.experts = gate_up.dim(0);
    d.inter = gate_up.dim(1) / 2;
    d.hidden = gate_up.dim(2);
    d.topk = ids.row_elems();
    d.alpha = p.alpha;
    d.limit = p.limit;
    d.scale = scale;
    Check(down.numel() == d.experts * d.hidden * d.inter && out.numel() == x.numel() &&
              x.dtype == DType::kBF16 && out.dtype == DType::kBF16 &&
              gate_up.dtype == DType::kBF16 && down.dtype == DType::kBF16 &&
              IsFloatActivation(weights.dtype),
          "MoeExperts shapes");
    const size_t bytes = k::MoeExpertsWorkspaceBytes(x.rows(), d);
    const k::MoeWorkspace ws{OpScratch(bytes), bytes};
    Run("MoeExperts", [&] {
      k::MoeGroupedExperts(ctx_->blas, x.data<bf16>(), x.rows(), ids.data<int32_t>(),
                           weights.data<void>(), ToElem(weights.dtype), gate_up.data<bf16>(),
                           down.data<bf16>(), d, out.data<bf16>(), S(), ws);
    });
  }

  void SegmentAttention(const DeviceTensor& qkv, const DeviceTensor& cos, const DeviceTensor& sin,
                        int64_t rot, std::span<const int64_t> segments, int64_t heads,
                        int64_t head_dim, const DeviceTensor& out) override {
    const int64_t rows = qkv.rows();
    Check(qkv.numel() == rows * 3 * heads * head_dim && out.numel() == rows * heads * head_dim,
          "SegmentAttention shapes");
    Check(!segments.empty() && segments.front() == 0 && segments.back() == rows,
          "SegmentAttention segments must cover the rows");
    Check(qkv.dtype == DType::kBF16 && out.dtype == DType::kBF16 && IsFloatActivation(cos.dtype) &&
              IsFloatActivation(sin.dtype),
          "SegmentAttention dtypes");
    const DeviceTensor c32 = AsF32(cos), s32 = AsF32(sin);
    std::vector<int32_t> seg(segments.begin(), segments.end());
    DeviceTensor dev_seg = Alloc(DType::kI32, {static_cast<int64_t>(seg.size())});
    Upload(seg.data(), dev_seg);
    Run("SegmentAttention", [&] {
      k::SegmentAttention(qkv.data<bf16>(), rows, heads, head_dim, c32.data<float>(),
                          s32.data<float>(), rot, dev_seg.data<int32_t>(),
                          static_cast<int64_t>(seg.size()) - 1, out.data<bf16>(), S());
    });
    // `seg` is pageable host memory the upload was staged from; the kernel reads dev_seg.
  }

  void SampleRows(const DeviceTensor& logits, std::span<const SampleRow> rows,
                  std::vector<SampledToken>& out) override {
    CudaSampleRows(*this, S(), logits, rows, out);
  }

 private:
  static constexpr size_t kStagingBytes = size_t{32} << 20;
  static constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;  // cuBLAS's advice for Hopper

  cudaStream_t S() const {
    BindDevice(ctx_->device);
    return ctx_->stream;
  }

  // Scratch for one op's kernels (split-K partials, block scores), shared by every op: ops run in
  // stream order, so each may reuse what the previous one used. It grows to the largest need
  // seen, outside recordings only (a recorded graph keeps the address it was recorded with, so
  // buffers it outgrew stay alive until the backend goes); the decode graphs run a bucket once
  // op by op before recording it, so its needs are met by then.
  void* OpScratch(size_t bytes) {
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

  // t itself when float32, else a float32 copy (tables the kernels read in f32).
  DeviceTensor AsF32(const DeviceTensor& t) {
    if (t.dtype == DType::kF32) return t;
    DeviceTensor f = Alloc(DType::kF32, t.shape);
    Run("AsF32", [&] {
      k::ConvertFloats(t.data<void>(), ToElem(t.dtype), f.data<void>(), ElemType::kF32, t.numel(),
                       S());
    });
    return f;
  }

  DeviceTensor Make(DType dtype, Shape shape, bool persistent) {
    DeviceTensor t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.buffer = std::make_shared<CudaBuffer>(t.bytes(), persistent, ctx_);
    return t;
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

void* CudaBackendStream(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  Require(cuda != nullptr, ErrorCode::kInvalidArgument,
          "backend " + backend.name() + " is not a CUDA backend");
  return cuda->stream();
}

std::unique_ptr<Backend> MakeCudaBackend(const std::string& device) {
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
  return std::make_unique<CudaBackend>(index);
}

}  // namespace m3::engine::backend
