// BlockScaledLinear: the decode GEMV (in passes of 64 rows up to 128 rows for MXFP8, 256 for
// NVFP4) or, for prefill-sized batches, row chunks of W dequantized to bf16
// (DequantizeScaledRows) and one cublasGemmEx per chunk writing its columns of y (ldc n).
// Dequantizing costs one read of the quantized weights and a write and read of the bf16 chunk,
// small beside an 8K-token GEMM's arithmetic; chunks keep the workspace bounded.
// NVFP4 chunks are dequantized without their f32 row scale (e2m1 x e4m3 is exact in bf16), the
// GEMM writes f32 into the workspace (passes of input rows) and a small epilogue multiplies each
// output column by its row scale and rounds once: the GEMM's f32 sums are the only other rounding
// (rounding the scaled weights to bf16 erred by about 2^-9 / sqrt(3) per weight).
#include "kernels/cuda/block_scaled_linear.cuh"

#include <algorithm>
#include <climits>
#include <string>

#include "kernels/cuda/block_scaled_dequantize.cuh"
#include "kernels/cuda/block_scaled_gemv.cuh"
#include "kernels/cuda/elementwise.cuh"

namespace m3::kernels::cuda {
namespace {

// Rows of W per dequantized chunk: as many as kBlockScaledChunkBytes holds, a multiple of 128
// (cuBLAS tiles), at least 128.
int64_t ChunkRows(int64_t n, int64_t k) {
  const int64_t fit = static_cast<int64_t>(kBlockScaledChunkBytes / (2 * static_cast<size_t>(k)));
  return std::min(n, std::max<int64_t>(128, fit / 128 * 128));
}

// Rows up to which the GEMV runs in passes of kBlockScaledGemvMaxRows (each pass reads the
// quantized weights again: below these, fewer bytes than dequantizing to bf16 and reading that).
int64_t GemvPassRows(WeightKind kind) {
  return kind == WeightKind::kNvfp4 ? 4 * kBlockScaledGemvMaxRows : 2 * kBlockScaledGemvMaxRows;
}
bool InPasses(int64_t m, int64_t k, WeightKind kind) {
  return m <= GemvPassRows(kind) && BlockScaledGemvFits(1, k, kind);
}

size_t Aligned256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Input rows per GEMM pass of an NVFP4 chunk (its f32 output at most kBlockScaledChunkBytes).
int64_t PassRows(int64_t m, int64_t chunk) {
  return std::min(
      m, std::max<int64_t>(128,
                           static_cast<int64_t>(kBlockScaledChunkBytes / (4 * chunk)) / 128 * 128));
}

// y[r, col0 + c] = acc[r, c] * row_scale[c] (acc [rows, cols] f32, y rows ldy apart).
__global__ void RowScaleKernel(const float* acc, int64_t rows, int64_t cols, const float* row_scale,
                               void* y, ElemType yt, int64_t ldy, int64_t col0) {
  ChainedKernelStart();
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  const float v = acc[i] * row_scale[c];
  if (yt == ElemType::kF32)
    Store(static_cast<float*>(y), r * ldy + col0 + c, v);
  else
    Store(static_cast<bf16*>(y), r * ldy + col0 + c, v);
}

}  // namespace

size_t BlockScaledLinearWorkspaceBytes(int64_t m, int64_t n, int64_t k, WeightKind kind) {
  if (InPasses(m, k, kind)) {
    const int64_t full = std::min(m, kBlockScaledGemvMaxRows), last = m % kBlockScaledGemvMaxRows;
    return std::max(BlockScaledGemvWorkspaceBytes(full, n, k, kind),
                    last > 0 ? BlockScaledGemvWorkspaceBytes(last, n, k, kind) : size_t{0});
  }
  const int64_t chunk = ChunkRows(n, k);
  const size_t weights = Aligned256(static_cast<size_t>(chunk * k) * 2);
  if (kind != WeightKind::kNvfp4) return weights;
  return weights + static_cast<size_t>(PassRows(m, chunk) * chunk) * 4;
}

void BlockScaledLinear(cublasHandle_t handle, const bf16* x, int64_t m, const ScaledRows& w,
                       int64_t n, int64_t k, const float* bias, void* y, ElemType yt,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  const size_t y_size = yt == ElemType::kF32 ? 4 : 2;
  if (InPasses(m, k, w.kind)) {
    for (int64_t r0 = 0; r0 < m; r0 += kBlockScaledGemvMaxRows)
      BlockScaledGemv(x + r0 * k, std::min(kBlockScaledGemvMaxRows, m - r0), w, n, k,
                      static_cast<char*>(y) + r0 * n * y_size, yt, workspace, workspace_bytes,
                      stream);
  } else {
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
      throw std::runtime_error("BlockScaledLinear: dimensions beyond cuBLAS's int range");
    const int64_t chunk = ChunkRows(n, k);
    const bool nv = w.kind == WeightKind::kNvfp4;
    const size_t weight_bytes = Aligned256(static_cast<size_t>(chunk * k) * 2);
    const int64_t pass = nv ? PassRows(m, chunk) : m;
    const size_t need = nv ? weight_bytes + static_cast<size_t>(pass * chunk) * 4
                           : static_cast<size_t>(chunk * k) * 2;
    if (workspace == nullptr || workspace_bytes < need)
      throw std::runtime_error("BlockScaledLinear: workspace below " + std::to_string(need) +
                               " bytes");
    if (nv && w.row_scale == nullptr)
      throw std::runtime_error("BlockScaledLinear: NVFP4 weights without their row scales");
    bf16* wb = static_cast<bf16*>(workspace);
    float* acc =
        nv ? reinterpret_cast<float*>(static_cast<char*>(workspace) + weight_bytes) : nullptr;
    const cudaDataType_t ct = yt == ElemType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
    const float alpha = 1.0f, beta = 0.0f;
    auto gemm = [&](int64_t rows, int64_t mr, const bf16* xr, void* out, cudaDataType_t ot,
                    int64_t ldc) {
      // Row-major y[:, n0:n0+rows] = x . Wc^T is column-major y^T = Wc x^T.
      const cublasStatus_t s =
          cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows),
                       static_cast<int>(mr), static_cast<int>(k), &alpha, wb, CUDA_R_16BF,
                       static_cast<int>(k), xr, CUDA_R_16BF, static_cast<int>(k), &beta, out, ot,
                       static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      if (s != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string("BlockScaledLinear: cublasGemmEx failed: ") +
                                 cublasGetStatusString(s));
    };
    for (int64_t n0 = 0; n0 < n; n0 += chunk) {
      const int64_t rows = std::min(chunk, n - n0);
      DequantizeScaledRows(w, n0, rows, k, wb, stream, /*row_scaled=*/!nv);
      if (!nv) {
        gemm(rows, m, x, static_cast<char*>(y) + n0 * y_size, ct, n);
        continue;
      }
      for (int64_t r0 = 0; r0 < m; r0 += pass) {
        const int64_t mr = std::min(pass, m - r0);
        gemm(rows, mr, x + r0 * k, acc, CUDA_R_32F, rows);
        LaunchAfterPrior(RowScaleKernel, Blocks(mr * rows, 256), 256, 0, stream, acc, mr, rows,
                         w.row_scale + n0, static_cast<char*>(y) + r0 * n * y_size, yt, n, n0);
        CheckLaunch("BlockScaledLinear (row scales)");
      }
    }
  }
  if (bias) AddBias(y, yt, bias, m, n, stream);
}

}  // namespace m3::kernels::cuda
