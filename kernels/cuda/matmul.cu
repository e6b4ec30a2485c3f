// Linear: row-major y = x w^T is column-major y^T = w x^T, one cublasGemmEx; the bias is a
// separate row pass.
#include "kernels/cuda/matmul.cuh"

#include <climits>

#include "kernels/cuda/elementwise.cuh"

namespace m3::kernels::cuda {

void Linear(cublasHandle_t handle, const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n,
            const float* bias, void* y, ElemType yt, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    throw std::runtime_error("Linear: dimensions beyond cuBLAS's int range");
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
