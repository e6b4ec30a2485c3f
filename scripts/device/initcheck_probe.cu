// initcheck_probe: whether compute-sanitizer initcheck sees what a cuBLAS bf16 GEMM writes. The
// GEMM has the shape of m3-tiny's QKV projection (ROWS x 64 -> 304 columns, bf16 in and out, f32
// accumulation, as the CUDA backend's Linear calls it) and writes a freshly allocated,
// never-initialized buffer that a kernel then reads whole. A report of "Uninitialized __global__
// memory read" in ReadAll means initcheck misses the GEMM's stores (the tool's gap, as suspected
// for the report in QkNormRopeKernel); none means the GEMM's output is tracked and that report
// needs looking into. Usage: initcheck_probe [ROWS] (default 6). Built with -lcublas.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

__global__ void ReadAll(const __nv_bfloat16* y, int n, float* sum) {
  float s = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    s += __bfloat162float(y[i]);
  atomicAdd(sum, s);
}

}  // namespace

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 6, in = 64, out = 304;
  std::vector<__nv_bfloat16> hx(rows * in), hw(out * in);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = __float2bfloat16(0.01f * (i % 17));
  for (size_t i = 0; i < hw.size(); ++i) hw[i] = __float2bfloat16(0.02f * (i % 13) - 0.1f);
  __nv_bfloat16 *x, *w, *y;
  float* sum;
  cudaMalloc(&x, hx.size() * 2);
  cudaMalloc(&w, hw.size() * 2);
  cudaMalloc(&y, size_t{2} * rows * out);  // left uninitialized on purpose
  cudaMalloc(&sum, sizeof(float));
  cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(sum, 0, sizeof(float));
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return std::printf("cublasCreate failed\n"), 1;
  const float one = 1, zero = 0;
  // y[rows, out] = x[rows, in] . w[out, in]^T, row-major, as column-major y^T = w . x^T.
  const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one, w,
                                         CUDA_R_16BF, in, x, CUDA_R_16BF, in, &zero, y, CUDA_R_16BF,
                                         out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) return std::printf("cublasGemmEx failed: %d\n", st), 1;
  ReadAll<<<4, 128>>>(y, rows * out, sum);
  float hs = 0;
  cudaMemcpy(&hs, sum, sizeof(float), cudaMemcpyDeviceToHost);
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("initcheck_probe rows %d: sum %g (%s)\n", rows, hs, cudaGetErrorString(e));
  cublasDestroy(h);
  return e == cudaSuccess ? 0 : 1;
}
