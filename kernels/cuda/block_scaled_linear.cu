// BlockScaledLinear: the decode GEMV (in passes of 64 rows up to 128 rows for MXFP8, 256 for
// NVFP4) or, for prefill-sized batches, row chunks of W dequantized to bf16
// (DequantizeScaledRows) and one cublasGemmEx per chunk writing its columns of y (ldc n).
// Dequantizing costs one read of the quantized weights and a write and read of the bf16 chunk,
// small beside an 8K-token GEMM's arithmetic; chunks keep the workspace bounded.
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

}  // namespace

size_t BlockScaledLinearWorkspaceBytes(int64_t m, int64_t n, int64_t k, WeightKind kind) {
  if (InPasses(m, k, kind)) {
    const int64_t full = std::min(m, kBlockScaledGemvMaxRows), last = m % kBlockScaledGemvMaxRows;
    return std::max(BlockScaledGemvWorkspaceBytes(full, n, k, kind),
                    last > 0 ? BlockScaledGemvWorkspaceBytes(last, n, k, kind) : size_t{0});
  }
  return static_cast<size_t>(ChunkRows(n, k) * k) * 2;
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
    if (workspace == nullptr || workspace_bytes < static_cast<size_t>(chunk * k) * 2)
      throw std::runtime_error("BlockScaledLinear: workspace below " +
                               std::to_string(chunk * k * 2) + " bytes");
    bf16* wb = static_cast<bf16*>(workspace);
    const cudaDataType_t ct = yt == ElemType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
    const float alpha = 1.0f, beta = 0.0f;
    for (int64_t n0 = 0; n0 < n; n0 += chunk) {
      const int64_t rows = std::min(chunk, n - n0);
      DequantizeScaledRows(w, n0, rows, k, wb, stream);
      // Row-major y[:, n0:n0+rows] = x . Wc^T is column-major y^T = Wc x^T with ldc n.
      const cublasStatus_t s = cublasGemmEx(
          handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(m),
          static_cast<int>(k), &alpha, wb, CUDA_R_16BF, static_cast<int>(k), x, CUDA_R_16BF,
          static_cast<int>(k), &beta, static_cast<char*>(y) + n0 * y_size, ct, static_cast<int>(n),
          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      if (s != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string("BlockScaledLinear: cublasGemmEx failed: ") +
                                 cublasGetStatusString(s));
    }
  }
  if (bias) AddBias(y, yt, bias, m, n, stream);
}

}  // namespace m3::kernels::cuda
