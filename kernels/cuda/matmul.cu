// Linear: row-major y = x w^T is column-major y^T = w x^T, one cublasGemmEx, except for a few
// rows (decode steps), where a GEMV kernel streams w once with 16-byte loads and keeps more of
// HBM's bandwidth than cuBLAS does at that shape (H100: ~2.3 TB/s for cuBLAS at one row of the
// 6144-wide projections); the bias is a separate row pass.
#include "kernels/cuda/matmul.cuh"

#include <algorithm>
#include <climits>

#include "kernels/cuda/bf16x8.cuh"
#include "kernels/cuda/elementwise.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int64_t kGemvMaxRows = 4;
constexpr int kGemvWarps = 8;  // one output column per warp
constexpr int kGemvRowsPerPass = 4;

template <int MC, typename Y>
__device__ __forceinline__ void GemvRows(const uint4* wr, const uint4* xs, int64_t k8, int64_t r0,
                                         int64_t col, int64_t n, Y* y) {
  float acc[1][MC] = {};
  const uint4* const w[1] = {wr};
  DotRows<1, MC>(w, xs, k8, acc);
#pragma unroll
  for (int r = 0; r < MC; ++r) {
    const float v = WarpSum(acc[0][r]);
    if ((threadIdx.x & 31) == 0) Store(y, (r0 + r) * n + col, v);
  }
}

// Split k: for outputs too few to fill the GPU one warp each (the MoE router's 128), one block
// per output column, its warps splitting k, so each warp's loads are a single pass.
template <int MC, typename Y>
__device__ __forceinline__ void SplitRows(const uint4* wr, const uint4* xs, int64_t k8, int64_t r0,
                                          int64_t col, int64_t n, float* part, Y* y) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t per = (k8 + kGemvWarps - 1) / kGemvWarps, c0 = warp * per;
  const int64_t len = c0 < k8 ? (k8 - c0 < per ? k8 - c0 : per) : 0;
  float acc[1][MC] = {};
  const uint4* const w[1] = {wr + c0};
  DotRows<1, MC>(w, xs + c0, len, acc, k8);
#pragma unroll
  for (int r = 0; r < MC; ++r) {
    const float v = WarpSum(acc[0][r]);
    if (lane == 0) part[warp * kGemvRowsPerPass + r] = v;
  }
  __syncthreads();
  if (threadIdx.x < MC) {
    float t = 0.0f;
    for (int i = 0; i < kGemvWarps; ++i) t += part[i * kGemvRowsPerPass + threadIdx.x];
    Store(y, (r0 + threadIdx.x) * n + col, t);
  }
}

template <int MC, bool kSplitK, typename Y>
__device__ __forceinline__ void PassRows(const uint4* wr, const uint4* xs, int64_t k8, int64_t r0,
                                         int64_t col, int64_t n, float* part, Y* y) {
  if constexpr (kSplitK)
    SplitRows<MC>(wr, xs, k8, r0, col, n, part, y);
  else
    GemvRows<MC>(wr, xs, k8, r0, col, n, y);
}

// y[r, n] = x[r] . w[n] for r < m <= kGemvMaxRows: x staged in shared memory
// (kGemvRowsPerPass rows per pass; a second pass re-reads the block's w rows from L2). One
// output column per warp, or per block with kSplitK.
template <typename Y, bool kSplitK>
__global__ void __launch_bounds__(32 * kGemvWarps)
    GemvKernel(const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n, Y* y) {
  ChainedKernelStart();
  extern __shared__ uint4 xs[];                          // [kGemvRowsPerPass, k / 8]
  __shared__ float part[kGemvWarps * kGemvRowsPerPass];  // split-k partial sums
  const int warp = threadIdx.x / 32;
  const int64_t col = kSplitK ? int64_t{blockIdx.x} : int64_t{blockIdx.x} * kGemvWarps + warp;
  const int64_t k8 = k / 8;
  const uint4* wr = reinterpret_cast<const uint4*>(w + col * k);
  for (int64_t r0 = 0; r0 < m; r0 += kGemvRowsPerPass) {
    const int mr = static_cast<int>(m - r0 < kGemvRowsPerPass ? m - r0 : kGemvRowsPerPass);
    __syncthreads();
    for (int64_t i = threadIdx.x; i < mr * k8; i += blockDim.x)
      xs[i] = reinterpret_cast<const uint4*>(x + r0 * k)[i];
    __syncthreads();
    if (col >= n) continue;  // never with kSplitK (a block per column)
    static_assert(kGemvRowsPerPass == 4, "the switch below covers 1 to 4 rows");
    switch (mr) {
      case 1:
        PassRows<1, kSplitK>(wr, xs, k8, r0, col, n, part, y);
        break;
      case 2:
        PassRows<2, kSplitK>(wr, xs, k8, r0, col, n, part, y);
        break;
      case 3:
        PassRows<3, kSplitK>(wr, xs, k8, r0, col, n, part, y);
        break;
      default:
        PassRows<4, kSplitK>(wr, xs, k8, r0, col, n, part, y);
    }
  }
}

// Outputs below which the split kernel is used: fewer than about four warps per SM.
constexpr int64_t kSplitBelow = 512;

// Input rows staged per block: at most 96 KiB (four rows of 12288; the 8192-wide o_proj at
// batch 1 stages 16 KiB).
constexpr size_t kMaxStagedBytes = 96 * 1024;

size_t StagedBytes(int64_t m, int64_t k) {
  return static_cast<size_t>(std::min<int64_t>(m, kGemvRowsPerPass) * k * 2);
}

bool GemvFits(int64_t m, int64_t k) {
  return m <= kGemvMaxRows && k % 8 == 0 && StagedBytes(m, k) <= kMaxStagedBytes;
}

template <auto Kernel, typename Y>
void LaunchGemv(unsigned blocks, size_t smem, const bf16* x, int64_t m, int64_t k, const bf16* w,
                int64_t n, Y* y, cudaStream_t stream) {
  // The kernel's static partial sums count against the same 48 KiB default.
  if (smem + 1024 > 48 * 1024) AllowDynamicShared<Kernel>(smem);
  LaunchAfterPrior(Kernel, blocks, 32 * kGemvWarps, smem, stream, x, m, k, w, n, y);
}

}  // namespace

void Linear(cublasHandle_t handle, const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n,
            const float* bias, void* y, ElemType yt, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    throw std::runtime_error("Linear: dimensions beyond cuBLAS's int range");
  if (GemvFits(m, k)) {
    const unsigned blocks = static_cast<unsigned>((n + kGemvWarps - 1) / kGemvWarps);
    const unsigned split_blocks = static_cast<unsigned>(n);
    const size_t smem = StagedBytes(m, k);  // only the rows there are: more blocks per SM
    float* yf = static_cast<float*>(y);
    bf16* yb = static_cast<bf16*>(y);
    if (n < kSplitBelow && yt == ElemType::kF32)
      LaunchGemv<GemvKernel<float, true>>(split_blocks, smem, x, m, k, w, n, yf, stream);
    else if (n < kSplitBelow)
      LaunchGemv<GemvKernel<bf16, true>>(split_blocks, smem, x, m, k, w, n, yb, stream);
    else if (yt == ElemType::kF32)
      LaunchGemv<GemvKernel<float, false>>(blocks, smem, x, m, k, w, n, yf, stream);
    else
      LaunchGemv<GemvKernel<bf16, false>>(blocks, smem, x, m, k, w, n, yb, stream);
    CheckLaunch("Linear (GEMV)");
    if (bias) AddBias(y, yt, bias, m, n, stream);
    return;
  }
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t ct = yt == ElemType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  const cublasStatus_t s =
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                   static_cast<int>(k), &alpha, w, CUDA_R_16BF, static_cast<int>(k), x, CUDA_R_16BF,
                   static_cast<int>(k), &beta, y, ct, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cublasGemmEx failed: ") + cublasGetStatusString(s) +
                             " (m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " +
                             std::to_string(k) + ")");
  if (bias) AddBias(y, yt, bias, m, n, stream);
}

}  // namespace m3::kernels::cuda
