// MoeGroupedExperts, paths with the same arithmetic (f32 accumulation, expert outputs in f32,
// the un-permutation summing in expert order, one block per row), chosen by the batch size:
// - decode-sized batches (up to kMoeGemvMaxPicks picks): the picks grouped by expert on the
//   device and GEMV kernels that read each selected expert once (moe_expert_gemv.cuh); nothing
//   waits for the host, so the step can be recorded as a CUDA graph;
// - decode sizes on shapes those kernels do not take: one GEMV per pick through
//   cublasGemmBatchedEx, its pointer arrays built on the device (as fast as the GEMV kernels
//   at one or two rows, docs/perf-log/moe-and-layer.md, but it cannot leave out the picks of
//   another rank's experts, which the GEMV kernels skip);
// - larger batches: a counting sort on the host over the downloaded expert ids (one
//   synchronization per MoE layer), the rows gathered on the device, each expert's GEMMs over
//   all its rows. Groups of similar size (prefill with balanced routing) are padded to the
//   largest and run as one cublasGemmBatchedEx per projection, which fills the GPU where each
//   expert's GEMM alone would not; uneven ones run the gate_up GEMMs of every expert in one
//   cublasGemmGroupedBatchedEx call for small groups, or one cublasGemmEx per expert for large
//   groups, which measured faster there (docs/perf-log/moe-and-layer.md), and the down GEMMs (f32
//   out, which the grouped call refuses) per expert; per-expert GEMMs spread over side streams.
// Negative ids (expert parallelism: picks of experts another rank holds) add nothing on any
// path. M3_MOE_GEMM=gemv|pick|padded|grouped|loop forces a path where it can run (tests,
// benchmarks); M3_MOE_DEQUANT_CHUNK_EXPERTS=n sets the experts per dequantized chunk of the
// block-scaled large-batch path (tests).
#include "kernels/cuda/moe_experts.cuh"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda/block_scaled_dequantize.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/moe_expert_gemv.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kMaxTopk = 32;

// pick_slot: the row of ys holding each pick's output; null: pick p is row p. Grid (column
// blocks, rows): the row's picks are put in expert order once per block (the order the CPU twin
// sums in: by expert id, stable), then each thread sums its column over them, all loads in
// flight together (one block per row looping over 6144 columns took 23 us at batch 1).
constexpr int kUnpermuteThreads = 256;

// V consecutive columns per thread: 4 (16-byte loads of the f32 expert outputs) for prefill-
// sized batches, where the kernel streams every pick's output row and one column per thread
// left it latency-bound; 1 for decode batches, where more blocks finish sooner.
template <int V>
__global__ void __launch_bounds__(kUnpermuteThreads)
    UnpermuteKernel(const float* ys, const int32_t* pick_slot, const int32_t* ids,
                    const void* weights, ElemType wt, int64_t K, int64_t H, float scale,
                    bf16* out) {
  ChainedKernelStart();
  __shared__ int64_t slot_of[kMaxTopk];
  __shared__ float weight_of[kMaxTopk];
  __shared__ int live;  // the row's picks of this rank's experts (negative ids: another rank's)
  const int64_t r = blockIdx.y;
  if (threadIdx.x < K) {
    const int j = static_cast<int>(threadIdx.x);
    const int32_t e = ids[r * K + j];
    int rank = 0, n = 0;
    for (int q = 0; q < K; ++q) {
      const int32_t eq = ids[r * K + q];
      n += eq >= 0;
      rank += eq >= 0 && (eq < e || (eq == e && q < j));
    }
    if (e >= 0) {
      slot_of[rank] = pick_slot ? int64_t{pick_slot[r * K + j]} : r * K + j;
      weight_of[rank] = LoadAny(weights, wt, r * K + j);
    }
    if (j == 0) live = n;
  }
  __syncthreads();
  const int n_live = live;
  const int64_t c = (int64_t{blockIdx.x} * kUnpermuteThreads + threadIdx.x) * V;
  if (c >= H) return;
  if constexpr (V == 1) {
    float routed = 0.0f;
#pragma unroll 8
    for (int i = 0; i < n_live; ++i) routed += ys[slot_of[i] * H + c] * weight_of[i];
    out[r * H + c] = __float2bfloat16(routed * scale + __bfloat162float(out[r * H + c]));
  } else {
    static_assert(V == 4, "4 columns: one float4 of each expert output");
    float4 routed = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8
    for (int i = 0; i < n_live; ++i) {
      const float4 y = *reinterpret_cast<const float4*>(ys + slot_of[i] * H + c);
      const float w = weight_of[i];
      routed.x += y.x * w;
      routed.y += y.y * w;
      routed.z += y.z * w;
      routed.w += y.w * w;
    }
    __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(out + r * H + c);
    const float2 o0 = __bfloat1622float2(o[0]), o1 = __bfloat1622float2(o[1]);
    o[0] = __floats2bfloat162_rn(routed.x * scale + o0.x, routed.y * scale + o0.y);
    o[1] = __floats2bfloat162_rn(routed.z * scale + o1.x, routed.w * scale + o1.y);
  }
}

void Unpermute(const float* ys, const int32_t* pick_slot, const int32_t* ids, const void* weights,
               ElemType wt, int64_t rows, int64_t K, int64_t H, float scale, bf16* out,
               cudaStream_t stream) {
  constexpr int64_t kVectorRows = 16;
  if (rows >= kVectorRows && H % 4 == 0 && Aligned16(ys) &&
      reinterpret_cast<uintptr_t>(out) % 8 == 0) {
    const dim3 grid(Blocks(H / 4, kUnpermuteThreads), static_cast<unsigned>(rows));
    LaunchAfterPrior(UnpermuteKernel<4>, grid, kUnpermuteThreads, 0, stream, ys, pick_slot, ids,
                     weights, wt, K, H, scale, out);
  } else {
    const dim3 grid(Blocks(H, kUnpermuteThreads), static_cast<unsigned>(rows));
    LaunchAfterPrior(UnpermuteKernel<1>, grid, kUnpermuteThreads, 0, stream, ys, pick_slot, ids,
                     weights, wt, K, H, scale, out);
  }
  CheckLaunch("MoeGroupedExperts un-permutation");
}

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("MoeGroupedExperts: ") + what + ": " +
                             cudaGetErrorString(e));
}

// The per-pick operands of both batched GEMVs. Ids come from MoeRoute (always in range); one
// out of range is clamped rather than read beyond the weights, and a negative one (another
// rank's expert) computes expert 0 for nothing (the un-permutation skips it).
__global__ void PickPointersKernel(const int32_t* ids, int64_t picks, int64_t K, int64_t E,
                                   int64_t H, int64_t I, const bf16* x, const bf16* gate_up,
                                   const bf16* down, bf16* gu, bf16* act, float* ys,
                                   const void** ptrs) {
  ChainedKernelStart();
  const int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (p >= picks) return;
  const int64_t e = min(max(int64_t{ids[p]}, int64_t{0}), E - 1);
  ptrs[p] = gate_up + e * 2 * I * H;       // gate_up GEMV: A
  ptrs[picks + p] = x + (p / K) * H;       //               B (the pick's token row)
  ptrs[2 * picks + p] = gu + p * 2 * I;    //               C
  ptrs[3 * picks + p] = down + e * H * I;  // down GEMV:    A
  ptrs[4 * picks + p] = act + p * I;       //               B
  ptrs[5 * picks + p] = ys + p * H;        //               C
}

// y_p = W_p b_p for every pick p (row-major W [n, k]; column-major y^T = W b^T, as Linear).
void BatchedGemv(cublasHandle_t handle, const void* const* w, const void* const* b, void* const* y,
                 int64_t n, int64_t k, cudaDataType_t yt, int64_t picks) {
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s = cublasGemmBatchedEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), 1, static_cast<int>(k), &alpha, w,
      CUDA_R_16BF, static_cast<int>(k), b, CUDA_R_16BF, static_cast<int>(k), &beta, y, yt,
      static_cast<int>(n), static_cast<int>(picks), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("MoeGroupedExperts: cublasGemmBatchedEx failed: ") +
                             cublasGetStatusString(s));
}

size_t Aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Side streams, each with its own cuBLAS handle (and so its own workspace), on which the
// per-expert GEMMs of a large batch run concurrently: one GEMM of a few hundred rows fills
// about half of an H100, so one after another leaves it half idle. Made once per device and
// kept for the process.
constexpr int kSideStreams = 4;
struct SideStreams {
  cudaStream_t stream[kSideStreams];
  cublasHandle_t blas[kSideStreams];
  cudaEvent_t fork, join[kSideStreams];
};

SideStreams& Side() {
  static std::mutex mu;
  static std::map<int, SideStreams*> by_device;
  int device = 0;
  Check(cudaGetDevice(&device), "current device");
  std::lock_guard<std::mutex> lock(mu);
  SideStreams*& s = by_device[device];
  if (s == nullptr) {
    auto made = std::make_unique<SideStreams>();
    Check(cudaEventCreateWithFlags(&made->fork, cudaEventDisableTiming), "side stream event");
    for (int i = 0; i < kSideStreams; ++i) {
      Check(cudaStreamCreateWithFlags(&made->stream[i], cudaStreamNonBlocking), "side stream");
      Check(cudaEventCreateWithFlags(&made->join[i], cudaEventDisableTiming), "side stream event");
      if (cublasCreate(&made->blas[i]) != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error("MoeGroupedExperts: cuBLAS handle for a side stream");
      cublasSetStream(made->blas[i], made->stream[i]);
    }
    s = made.release();
  }
  return *s;
}

// xs[slot] = x[perm[slot]], zeros where perm is -1 (padding rows).
// T: bf16, or uint4 (8 bf16 at a time) when rows are 16-byte aligned; H counts T elements.
template <class T>
__global__ void PaddedGatherKernel(const T* x, int64_t H, const int32_t* perm, T* xs) {
  const int64_t slot = blockIdx.x;
  const int32_t r = perm[slot];
  for (int64_t c = threadIdx.x; c < H; c += blockDim.x)
    xs[slot * H + c] = r >= 0 ? x[r * H + c] : T{};
}

// C_i = B_i A_i^T for `batch` problems of the same shape (A_i [n, k] row-major as Linear's
// weights, B_i [m, k], C_i [m, n] of type ct): one cublasGemmBatchedEx launch.
void BatchedGemm(cublasHandle_t handle, const void* const* a, const void* const* b, void* const* c,
                 int64_t n, int64_t m, int64_t k, cudaDataType_t ct, int64_t batch) {
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s = cublasGemmBatchedEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
      static_cast<int>(k), &alpha, a, CUDA_R_16BF, static_cast<int>(k), b, CUDA_R_16BF,
      static_cast<int>(k), &beta, c, ct, static_cast<int>(n), static_cast<int>(batch),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("MoeGroupedExperts: cublasGemmBatchedEx failed: ") +
                             cublasGetStatusString(s));
}

std::atomic<int64_t> grouped_fallbacks{0};

enum class Path { kAuto, kGemv, kPick, kPadded, kGrouped, kLoop };
enum class Mode { kPadded, kGrouped, kLoop };  // the GEMMs after the host's sort

Path ForcedPath() {
  const char* v = std::getenv("M3_MOE_GEMM");
  if (v == nullptr) return Path::kAuto;
  if (std::strcmp(v, "gemv") == 0) return Path::kGemv;
  if (std::strcmp(v, "pick") == 0) return Path::kPick;
  if (std::strcmp(v, "padded") == 0) return Path::kPadded;
  if (std::strcmp(v, "grouped") == 0) return Path::kGrouped;
  if (std::strcmp(v, "loop") == 0) return Path::kLoop;
  return Path::kAuto;
}

// Where groups are too uneven to pad (more than 25% padding), the rows per expert from which
// one cublasGemmEx per expert beats the grouped call (H100, 128 experts of 3072 x 6144:
// 8K-token prefill, 256 rows per expert, 17.1 ms grouped against 8.6 ms looped; 64-row decode,
// ~3 rows per expert, grouped 10% faster).
constexpr int64_t kLoopGroupRows = 64;
// The token-dimension tile of cuBLAS's large GEMMs, by which padded groups are classed.
constexpr int64_t kPadTileRows = 128;

// One grouped cuBLAS call for the GEMMs y_g = x_g W_g^T of every group g (rows[g] rows; W_g
// [n, k] row-major, as Linear): ptrs holds the device pointer arrays W (G), x (G), y (G). All
// groups run in one launch, so small groups share the GPU instead of each filling a fraction
// of it. False where this cuBLAS does not support the call (the caller loops instead).
bool GroupedGemm(cublasHandle_t handle, const void* const* ptrs, const std::vector<int>& rows,
                 int64_t n, int64_t k, cudaDataType_t yt) {
  const int G = static_cast<int>(rows.size());
  if (G == 0) return true;
  const std::vector<cublasOperation_t> ta(G, CUBLAS_OP_T), tb(G, CUBLAS_OP_N);
  const std::vector<int> m_arr(G, static_cast<int>(n)), k_arr(G, static_cast<int>(k)), ones(G, 1);
  const std::vector<float> alpha(G, 1.0f), beta(G, 0.0f);
  const cublasStatus_t s = cublasGemmGroupedBatchedEx(
      handle, ta.data(), tb.data(), m_arr.data(), rows.data(), k_arr.data(), alpha.data(), ptrs,
      CUDA_R_16BF, k_arr.data(), ptrs + G, CUDA_R_16BF, k_arr.data(), beta.data(),
      const_cast<void* const*>(ptrs + 2 * G), yt, m_arr.data(), G, ones.data(), CUBLAS_COMPUTE_32F);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) {
    ++grouped_fallbacks;
    return false;
  }
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("MoeGroupedExperts: cublasGemmGroupedBatchedEx failed: ") +
                             cublasGetStatusString(s));
  return true;
}

// Scratch of one decode-sized call: the caller's workspace when it is large enough (a recorded
// step allocates nothing), else stream-ordered memory released after the call's work.
class CallScratch {
 public:
  CallScratch(size_t need, const MoeWorkspace& ws, cudaStream_t stream) : stream_(stream) {
    if (ws.data != nullptr && ws.bytes >= need) {
      p_ = static_cast<char*>(ws.data);
    } else {
      Check(cudaMallocAsync(reinterpret_cast<void**>(&p_), need, stream), "scratch allocation");
      owned_ = true;
    }
  }
  ~CallScratch() {
    if (owned_) cudaFreeAsync(p_, stream_);
  }
  CallScratch(const CallScratch&) = delete;
  CallScratch& operator=(const CallScratch&) = delete;
  char* get() const { return p_; }

 private:
  char* p_ = nullptr;
  bool owned_ = false;
  cudaStream_t stream_;
};

// Scratch of PerPickExperts: 6 pointer arrays, gu [picks, 2I], act [picks, I] (bf16), ys
// [picks, H] (f32).
struct PickLayout {
  size_t ptr, gu, act, ys;
  PickLayout(int64_t picks, const MoeExpertsDims& d)
      : ptr(Aligned(6 * picks * sizeof(void*))),
        gu(Aligned(picks * 2 * d.inter * 2)),
        act(Aligned(picks * d.inter * 2)),
        ys(Aligned(picks * d.hidden * 4)) {}
  size_t total() const { return ptr + gu + act + ys; }
};

// Scratch of GemvExperts: the GEMV kernels' own, slot_of_pick [picks], ys [picks, H] (f32).
struct GemvLayout {
  size_t own, slots, ys;
  GemvLayout(int64_t picks, const MoeExpertsDims& d)
      : own(Aligned(MoeExpertGemvScratchBytes(
            picks, MoeGemvDims{d.experts, d.hidden, d.inter, d.topk, d.alpha, d.limit}))),
        slots(Aligned(picks * sizeof(int32_t))),
        ys(Aligned(picks * d.hidden * 4)) {}
  size_t total() const { return own + slots + ys; }
};

void PerPickExperts(cublasHandle_t handle, const bf16* x, int64_t rows, const int32_t* ids,
                    const void* weights, ElemType weights_t, const bf16* gate_up, const bf16* down,
                    const MoeExpertsDims& d, bf16* out, const MoeWorkspace& ws,
                    cudaStream_t stream) {
  const int64_t H = d.hidden, I = d.inter, K = d.topk, picks = rows * K;
  const PickLayout l(picks, d);
  const CallScratch scratch(l.total(), ws, stream);
  const void** ptrs = reinterpret_cast<const void**>(scratch.get());
  bf16* gu = reinterpret_cast<bf16*>(scratch.get() + l.ptr);
  bf16* act = reinterpret_cast<bf16*>(scratch.get() + l.ptr + l.gu);
  float* ys = reinterpret_cast<float*>(scratch.get() + l.ptr + l.gu + l.act);
  LaunchAfterPrior(PickPointersKernel, Blocks(picks, 128), 128, 0, stream, ids, picks, K, d.experts,
                   H, I, x, gate_up, down, gu, act, ys, ptrs);
  CheckLaunch("MoeGroupedExperts pick pointers");
  BatchedGemv(handle, ptrs, ptrs + picks, const_cast<void* const*>(ptrs + 2 * picks), 2 * I, H,
              CUDA_R_16BF, picks);
  SwigluOai(gu, picks, I, d.alpha, d.limit, act, stream);
  BatchedGemv(handle, ptrs + 3 * picks, ptrs + 4 * picks,
              const_cast<void* const*>(ptrs + 5 * picks), H, I, CUDA_R_32F, picks);
  Unpermute(ys, nullptr, ids, weights, weights_t, rows, K, H, d.scale, out, stream);
}

void GemvExperts(const bf16* x, int64_t rows, const int32_t* ids, const void* weights,
                 ElemType weights_t, const bf16* gate_up, const bf16* down, const MoeExpertsDims& d,
                 bf16* out, const MoeWorkspace& ws, cudaStream_t stream) {
  const int64_t H = d.hidden, K = d.topk, picks = rows * K;
  const MoeGemvDims gd{d.experts, H, d.inter, K, d.alpha, d.limit};
  const GemvLayout l(picks, d);
  const CallScratch scratch(l.total(), ws, stream);
  int32_t* slot_of_pick = reinterpret_cast<int32_t*>(scratch.get() + l.own);
  float* ys = reinterpret_cast<float*>(scratch.get() + l.own + l.slots);
  MoeExpertGemv(x, rows, ids, gate_up, down, gd, scratch.get(), ys, slot_of_pick, stream);
  Unpermute(ys, slot_of_pick, ids, weights, weights_t, rows, K, H, d.scale, out, stream);
}

void GemvExpertsScaled(const bf16* x, int64_t rows, const int32_t* ids, const void* weights,
                       ElemType weights_t, const ScaledRows& gate_up, const ScaledRows& down,
                       const MoeExpertsDims& d, bf16* out, const MoeWorkspace& ws,
                       cudaStream_t stream) {
  const int64_t H = d.hidden, K = d.topk, picks = rows * K;
  const MoeGemvDims gd{d.experts, H, d.inter, K, d.alpha, d.limit};
  const GemvLayout l(picks, d);
  const CallScratch scratch(l.total(), ws, stream);
  int32_t* slot_of_pick = reinterpret_cast<int32_t*>(scratch.get() + l.own);
  float* ys = reinterpret_cast<float*>(scratch.get() + l.own + l.slots);
  MoeExpertGemvScaled(x, rows, ids, gate_up, down, gd, scratch.get(), ys, slot_of_pick, stream);
  Unpermute(ys, slot_of_pick, ids, weights, weights_t, rows, K, H, d.scale, out, stream);
}

// ids of experts [first, first + count) as 0.., the others -1 (another chunk's: nothing).
__global__ void ChunkIdsKernel(const int32_t* ids, int64_t picks, int32_t first, int32_t count,
                               int32_t* local) {
  ChainedKernelStart();
  const int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (p >= picks) return;
  const int32_t e = ids[p];
  local[p] = e >= first && e < first + count ? e - first : -1;
}

// Expert rows [e0 * rows_per, (e0 + n) * rows_per) of w as bf16: the weights themselves when
// they are bf16, else dequantized into `buf`.
const bf16* ExpertRows(const ScaledRows& w, int64_t e0, int64_t n, int64_t rows_per, int64_t k,
                       bf16* buf, cudaStream_t stream) {
  if (w.kind == WeightKind::kBf16) return static_cast<const bf16*>(w.data) + e0 * rows_per * k;
  DequantizeScaledRows(w, e0 * rows_per, n * rows_per, k, buf, stream);
  return buf;
}

}  // namespace

size_t MoeExpertsScaledWorkspaceBytes(int64_t rows, const MoeExpertsDims& d, WeightKind gate_up,
                                      WeightKind down) {
  if (gate_up == WeightKind::kBf16 && down == WeightKind::kBf16)
    return MoeExpertsWorkspaceBytes(rows, d);  // the bf16 paths themselves
  const int64_t picks = rows * d.topk;
  const MoeGemvDims gd{d.experts, d.hidden, d.inter, d.topk, d.alpha, d.limit};
  return MoeExpertGemvScaledFits(picks, gd) ? GemvLayout(picks, d).total() : 0;
}

namespace {
// The step's expert ids on the host and the picks of each expert (one synchronization: the
// prefill paths size their work by them); an id at or past `experts` is an error, a negative one
// (another rank's expert) counts nowhere.
struct HostPicks {
  std::vector<int32_t> ids;
  std::vector<int64_t> count;
};
HostPicks PicksPerExpert(const int32_t* ids, int64_t picks, int64_t experts, cudaStream_t stream) {
  HostPicks h{std::vector<int32_t>(picks), std::vector<int64_t>(experts, 0)};
  Check(cudaMemcpyAsync(h.ids.data(), ids, picks * sizeof(int32_t), cudaMemcpyDeviceToHost, stream),
        "expert ids download");
  Check(cudaStreamSynchronize(stream), "expert ids download");
  for (int32_t e : h.ids) {
    if (e >= experts) throw std::runtime_error("MoeGroupedExperts: expert id out of range");
    if (e >= 0) ++h.count[e];
  }
  return h;
}
}  // namespace

void MoeGroupedExpertsScaled(cublasHandle_t handle, const bf16* x, int64_t rows, const int32_t* ids,
                             const void* weights, ElemType weights_t, const ScaledRows& gate_up,
                             const ScaledRows& down, const MoeExpertsDims& d, bf16* out,
                             cudaStream_t stream, const MoeWorkspace& workspace) {
  const int64_t H = d.hidden, I = d.inter, E = d.experts, K = d.topk, picks = rows * K;
  if (rows <= 0) return;
  if (K > kMaxTopk) throw std::runtime_error("MoeGroupedExperts: top-k above 32");
  if (gate_up.kind == WeightKind::kBf16 && down.kind == WeightKind::kBf16) {
    MoeGroupedExperts(handle, x, rows, ids, weights, weights_t,
                      static_cast<const bf16*>(gate_up.data), static_cast<const bf16*>(down.data),
                      d, out, stream, workspace);
    return;
  }
  const MoeGemvDims gd{E, H, I, K, d.alpha, d.limit};
  if (MoeExpertGemvScaledFits(picks, gd)) {
    GemvExpertsScaled(x, rows, ids, weights, weights_t, gate_up, down, d, out, workspace, stream);
    return;
  }
  // Prefill-sized: the experts that have picks, dequantized chunk by chunk (one host
  // synchronization to learn which, then the bf16 path's own per chunk).
  const std::vector<int64_t> picks_of = PicksPerExpert(ids, picks, E, stream).count;
  const size_t per_expert = static_cast<size_t>(3 * I * H) * 2;
  int64_t chunk = static_cast<int64_t>(kMoeDequantChunkBytes / per_expert);
  if (const char* v = std::getenv("M3_MOE_DEQUANT_CHUNK_EXPERTS"))  // tests: several chunks
    chunk = std::atoll(v);
  chunk = std::clamp<int64_t>(chunk, 1, E);
  const size_t gu_bytes = Aligned(static_cast<size_t>(chunk * 2 * I * H) * 2);
  const size_t down_bytes = Aligned(static_cast<size_t>(chunk * H * I) * 2);
  char* scratch = nullptr;
  Check(cudaMallocAsync(reinterpret_cast<void**>(&scratch),
                        gu_bytes + down_bytes + Aligned(picks * sizeof(int32_t)), stream),
        "scratch allocation");
  bf16* gu_buf = reinterpret_cast<bf16*>(scratch);
  bf16* down_buf = reinterpret_cast<bf16*>(scratch + gu_bytes);
  int32_t* local = reinterpret_cast<int32_t*>(scratch + gu_bytes + down_bytes);
  MoeExpertsDims cd = d;
  try {
    for (int64_t e0 = 0; e0 < E; e0 += chunk) {
      const int64_t n = std::min(chunk, E - e0);
      if (std::all_of(picks_of.begin() + e0, picks_of.begin() + e0 + n,
                      [](int64_t c) { return c == 0; }))
        continue;
      const bf16* gu = ExpertRows(gate_up, e0, n, 2 * I, H, gu_buf, stream);
      const bf16* dn = ExpertRows(down, e0, n, H, I, down_buf, stream);
      LaunchAfterPrior(ChunkIdsKernel, Blocks(picks, 256), 256, 0, stream, ids, picks,
                       static_cast<int32_t>(e0), static_cast<int32_t>(n), local);
      CheckLaunch("MoeGroupedExperts chunk ids");
      cd.experts = n;
      MoeGroupedExperts(handle, x, rows, local, weights, weights_t, gu, dn, cd, out, stream);
    }
  } catch (...) {
    cudaFreeAsync(scratch, stream);
    throw;
  }
  Check(cudaFreeAsync(scratch, stream), "scratch release");
}

size_t MoeExpertsWorkspaceBytes(int64_t rows, const MoeExpertsDims& d) {
  const int64_t picks = rows * d.topk;
  const MoeGemvDims gd{d.experts, d.hidden, d.inter, d.topk, d.alpha, d.limit};
  size_t bytes = 0;
  if (MoeExpertGemvFits(picks, gd)) bytes = GemvLayout(picks, d).total();
  if (picks <= d.experts) bytes = std::max(bytes, PickLayout(picks, d).total());
  return bytes;
}

int64_t MoeGroupedGemmFallbacks() {
  return grouped_fallbacks.load();
}

void MoeGroupedExperts(cublasHandle_t handle, const bf16* x, int64_t rows, const int32_t* ids,
                       const void* weights, ElemType weights_t, const bf16* gate_up,
                       const bf16* down, const MoeExpertsDims& d, bf16* out, cudaStream_t stream,
                       const MoeWorkspace& workspace) {
  const int64_t H = d.hidden, I = d.inter, E = d.experts, K = d.topk, picks = rows * K;
  if (rows <= 0) return;
  if (K > kMaxTopk) throw std::runtime_error("MoeGroupedExperts: top-k above 32");
  const Path path = ForcedPath();
  const MoeGemvDims gd{E, H, I, K, d.alpha, d.limit};
  const bool gemv = MoeExpertGemvFits(picks, gd);
  if (gemv && (path == Path::kGemv || path == Path::kAuto)) {
    GemvExperts(x, rows, ids, weights, weights_t, gate_up, down, d, out, workspace, stream);
    return;
  }
  if (picks <= E &&
      (path == Path::kPick || ((path == Path::kAuto || path == Path::kGemv) && !gemv))) {
    PerPickExperts(handle, x, rows, ids, weights, weights_t, gate_up, down, d, out, workspace,
                   stream);
    return;
  }
  const HostPicks host = PicksPerExpert(ids, picks, E, stream);
  const std::vector<int32_t>& host_ids = host.ids;
  const std::vector<int64_t>& count = host.count;
  // Picks of this rank's experts (negative ids: another rank's, no slot).
  const int64_t live = std::accumulate(count.begin(), count.end(), int64_t{0});
  if (live == 0) {  // every pick another rank's: out = 0 * scale + out, as the other paths
    Unpermute(nullptr, nullptr, ids, weights, weights_t, rows, K, H, d.scale, out, stream);
    return;
  }
  // Experts in classes of equal 128-row tile counts (ascending), each class padded to its own
  // largest group: cuBLAS tiles the token dimension by 128, so one cap for all (the largest
  // group, a little over 256 rows for balanced prefill routing) made every expert pay for a
  // third tile that only the largest need.
  std::vector<int32_t> experts_used;
  for (int64_t e = 0; e < E; ++e)
    if (count[e] > 0) experts_used.push_back(static_cast<int32_t>(e));
  auto tiles = [&](int32_t e) { return (count[e] + kPadTileRows - 1) / kPadTileRows; };
  std::stable_sort(experts_used.begin(), experts_used.end(),
                   [&](int32_t a, int32_t b) { return tiles(a) < tiles(b); });
  const int64_t G = static_cast<int64_t>(experts_used.size());
  struct PadClass {
    int64_t first, groups, cap;  // groups [first, first + groups), rows padded to cap
  };
  std::vector<PadClass> classes;
  int64_t padded_slots = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t c = count[experts_used[g]];
    if (classes.empty() || tiles(experts_used[g]) != tiles(experts_used[classes.back().first]))
      classes.push_back({g, 0, 0});
    ++classes.back().groups;
    classes.back().cap = std::max(classes.back().cap, (c + 7) / 8 * 8);
  }
  for (const PadClass& c : classes) padded_slots += c.groups * c.cap;
  Mode mode = Mode::kLoop;
  if (path == Path::kGrouped)
    mode = Mode::kGrouped;
  else if (path == Path::kPadded)
    mode = Mode::kPadded;
  else if (path == Path::kAuto)
    mode = padded_slots * 4 <= live * 5 ? Mode::kPadded
           : live < kLoopGroupRows * G  ? Mode::kGrouped
                                        : Mode::kLoop;
  const int64_t slots = mode == Mode::kPadded ? padded_slots : live;
  if (slots > INT_MAX) throw std::runtime_error("MoeGroupedExperts: batch beyond int range");
  std::vector<int64_t> group_start(G + 1, 0);  // slot of each group's first row
  for (const PadClass& c : classes)
    for (int64_t g = c.first; g < c.first + c.groups; ++g)
      group_start[g + 1] =
          group_start[g] + (mode == Mode::kPadded ? c.cap : count[experts_used[g]]);
  std::vector<int64_t> fill(E, 0);
  for (int64_t g = 0; g < G; ++g) fill[experts_used[g]] = group_start[g];
  // Host-built upload: perm (source row per slot, -1: padding), pick -> slot, then the GEMMs'
  // pointer arrays (A, B, C of gate_up, then of down; one entry per non-empty expert).
  const size_t idx_bytes = Aligned((slots + picks) * sizeof(int32_t));
  const size_t ptr_bytes = Aligned(6 * G * sizeof(void*));
  std::vector<char> upload(idx_bytes + ptr_bytes);
  int32_t* index = reinterpret_cast<int32_t*>(upload.data());
  std::fill(index, index + slots + picks, -1);
  for (int64_t i = 0; i < picks; ++i) {
    if (host_ids[i] < 0) continue;
    const int64_t slot = fill[host_ids[i]]++;
    index[slot] = static_cast<int32_t>(i / K);
    index[slots + i] = static_cast<int32_t>(slot);
  }
  // One scratch allocation: the upload, xs [slots, H], gu [slots, 2I], act [slots, I] (bf16),
  // ys [slots, H] (f32).
  const size_t xs_bytes = Aligned(slots * H * 2);
  const size_t gu_bytes = Aligned(slots * 2 * I * 2);
  const size_t act_bytes = Aligned(slots * I * 2);
  const size_t ys_bytes = slots * H * 4;
  char* scratch = nullptr;
  Check(cudaMallocAsync(reinterpret_cast<void**>(&scratch),
                        idx_bytes + ptr_bytes + xs_bytes + gu_bytes + act_bytes + ys_bytes, stream),
        "scratch allocation");
  int32_t* dev_index = reinterpret_cast<int32_t*>(scratch);
  char* base = scratch + idx_bytes + ptr_bytes;
  bf16* xs = reinterpret_cast<bf16*>(base);
  bf16* gu = reinterpret_cast<bf16*>(base + xs_bytes);
  bf16* act = reinterpret_cast<bf16*>(base + xs_bytes + gu_bytes);
  float* ys = reinterpret_cast<float*>(base + xs_bytes + gu_bytes + act_bytes);
  const void** host_ptrs = reinterpret_cast<const void**>(upload.data() + idx_bytes);
  std::vector<int> group_rows(G);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t e = experts_used[g], off = group_start[g];
    group_rows[g] = static_cast<int>(count[e]);
    host_ptrs[g] = gate_up + e * 2 * I * H;
    host_ptrs[G + g] = xs + off * H;
    host_ptrs[2 * G + g] = gu + off * 2 * I;
    host_ptrs[3 * G + g] = down + e * H * I;
    host_ptrs[4 * G + g] = act + off * I;
    host_ptrs[5 * G + g] = ys + off * H;
  }
  const void* const* dev_ptrs = reinterpret_cast<const void* const*>(scratch + idx_bytes);
  try {
    Check(cudaMemcpyAsync(dev_index, upload.data(), upload.size(), cudaMemcpyHostToDevice, stream),
          "permutation upload");
    // The pageable upload is staged before cudaMemcpyAsync returns, but `upload` must outlive
    // the copy on every path: wait here (the step is already synchronized above).
    Check(cudaStreamSynchronize(stream), "permutation upload");
    if (H % 8 == 0 && Aligned16(x) && Aligned16(xs))
      PaddedGatherKernel<<<static_cast<unsigned>(slots), 128, 0, stream>>>(
          reinterpret_cast<const uint4*>(x), H / 8, dev_index, reinterpret_cast<uint4*>(xs));
    else
      PaddedGatherKernel<<<static_cast<unsigned>(slots), 128, 0, stream>>>(x, H, dev_index, xs);
    CheckLaunch("MoeGroupedExperts gather");
    // One cublasGemmEx per expert, spread over the side streams (forked from and joined
    // back into `stream`).
    auto loop = [&](const bf16* in, int64_t k, const bf16* w, int64_t n, void* y, ElemType yt) {
      const size_t y_size = yt == ElemType::kF32 ? 4 : 2;
      SideStreams& side = Side();
      Check(cudaEventRecord(side.fork, stream), "fork");
      for (int i = 0; i < kSideStreams; ++i)
        Check(cudaStreamWaitEvent(side.stream[i], side.fork, 0), "fork");
      // Joined on every exit, so `stream` (and the scratch release queued on it) waits for
      // whatever the side streams were given.
      struct Join {
        SideStreams& side;
        cudaStream_t stream;
        ~Join() {
          for (int i = 0; i < kSideStreams; ++i) {
            cudaEventRecord(side.join[i], side.stream[i]);
            cudaStreamWaitEvent(stream, side.join[i], 0);
          }
        }
      } join{side, stream};
      for (int64_t g = 0; g < G; ++g) {
        const int64_t e = experts_used[g], off = group_start[g];
        const int i = static_cast<int>(g % kSideStreams);
        Linear(side.blas[i], in + off * k, count[e], k, w + e * n * k, n, nullptr,
               static_cast<char*>(y) + off * n * y_size, yt, side.stream[i]);
      }
    };
    if (mode == Mode::kPadded) {
      for (const PadClass& c : classes)
        BatchedGemm(handle, dev_ptrs + c.first, dev_ptrs + G + c.first,
                    const_cast<void* const*>(dev_ptrs + 2 * G + c.first), 2 * I, c.cap, H,
                    CUDA_R_16BF, c.groups);
    } else if (mode == Mode::kLoop ||
               !GroupedGemm(handle, dev_ptrs, group_rows, 2 * I, H, CUDA_R_16BF)) {
      loop(xs, H, gate_up, 2 * I, gu, ElemType::kBF16);
    }
    SwigluOai(gu, slots, I, d.alpha, d.limit, act, stream);
    if (mode == Mode::kPadded)
      for (const PadClass& c : classes)
        BatchedGemm(handle, dev_ptrs + 3 * G + c.first, dev_ptrs + 4 * G + c.first,
                    const_cast<void* const*>(dev_ptrs + 5 * G + c.first), H, c.cap, I, CUDA_R_32F,
                    c.groups);
    else
      loop(act, I, down, H, ys, ElemType::kF32);
    Unpermute(ys, dev_index + slots, ids, weights, weights_t, rows, K, H, d.scale, out, stream);
  } catch (...) {
    cudaFreeAsync(scratch, stream);
    throw;
  }
  Check(cudaFreeAsync(scratch, stream), "scratch release");
}

}  // namespace m3::kernels::cuda
