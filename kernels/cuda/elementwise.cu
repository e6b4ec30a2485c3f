// Grid-stride element loops; the row gather copies 16-bit words, one block per row.
#include "kernels/cuda/elementwise.cuh"

namespace m3::kernels::cuda {
namespace {

__global__ void ConvertKernel(const void* src, ElemType st, void* dst, ElemType dt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    StoreAny(dst, dt, i, LoadAny(src, st, i));
}

__global__ void AddKernel(bf16* x, const bf16* d, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    x[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(d[i]));
}

__global__ void BiasKernel(void* y, ElemType yt, const float* bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    StoreAny(y, yt, i, LoadAny(y, yt, i) + bias[i % cols]);
}

__global__ void GatherKernel(const uint16_t* src, int64_t words, const int32_t* index,
                             uint16_t* dst) {
  const uint16_t* s = src + int64_t{index[blockIdx.x]} * words;
  uint16_t* d = dst + int64_t{blockIdx.x} * words;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) d[i] = s[i];
}

unsigned GridFor(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

}  // namespace

void ConvertFloats(const void* src, ElemType src_t, void* dst, ElemType dst_t, int64_t n,
                   cudaStream_t stream) {
  if (n <= 0) return;
  ConvertKernel<<<GridFor(n), 256, 0, stream>>>(src, src_t, dst, dst_t, n);
  CheckLaunch("ConvertFloats");
}

void AddInPlace(bf16* x, const bf16* delta, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  AddKernel<<<GridFor(n), 256, 0, stream>>>(x, delta, n);
  CheckLaunch("AddInPlace");
}

void AddBias(void* y, ElemType yt, const float* bias, int64_t rows, int64_t cols,
             cudaStream_t stream) {
  if (rows * cols <= 0) return;
  BiasKernel<<<GridFor(rows * cols), 256, 0, stream>>>(y, yt, bias, rows, cols);
  CheckLaunch("AddBias");
}

void GatherRows(const void* src, int64_t row_bytes, const int32_t* index, int64_t n, void* dst,
                cudaStream_t stream) {
  if (n <= 0) return;
  GatherKernel<<<static_cast<unsigned>(n), 256, 0, stream>>>(
      static_cast<const uint16_t*>(src), row_bytes / 2, index, static_cast<uint16_t*>(dst));
  CheckLaunch("GatherRows");
}

}  // namespace m3::kernels::cuda
