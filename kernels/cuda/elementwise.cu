// Grid-stride element loops; the row gather copies 16-byte units where it can.
#include "kernels/cuda/elementwise.cuh"

#include <algorithm>

namespace m3::kernels::cuda {
namespace {

__global__ void ConvertKernel(const void* src, ElemType st, void* dst, ElemType dt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    StoreAny(dst, dt, i, LoadAny(src, st, i));
}

__global__ void AddKernel(bf16* x, const bf16* d, int64_t n) {
  ChainedKernelStart();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    x[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(d[i]));
}

__global__ void BiasKernel(void* y, ElemType yt, const float* bias, int64_t rows, int64_t cols) {
  ChainedKernelStart();
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    StoreAny(y, yt, i, LoadAny(y, yt, i) + bias[i % cols]);
}

// Row blockIdx.x of dst = row index[x] of src, in units of T (16 bytes where the rows allow: a
// 6144-wide bf16 row is three loads per thread instead of 24 dependent 2-byte copies), the
// row's units spread over gridDim.y blocks.
template <typename T>
__global__ void GatherKernel(const T* __restrict__ src, int64_t units, const int32_t* index,
                             T* __restrict__ dst) {
  ChainedKernelStart();
  const T* s = src + int64_t{index[blockIdx.x]} * units;
  T* d = dst + int64_t{blockIdx.x} * units;
  for (int64_t i = int64_t{blockIdx.y} * blockDim.x + threadIdx.x; i < units;
       i += int64_t{gridDim.y} * blockDim.x)
    d[i] = s[i];
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
  LaunchAfterPrior(AddKernel, GridFor(n), 256, 0, stream, x, delta, n);
  CheckLaunch("AddInPlace");
}

void AddBias(void* y, ElemType yt, const float* bias, int64_t rows, int64_t cols,
             cudaStream_t stream) {
  if (rows * cols <= 0) return;
  LaunchAfterPrior(BiasKernel, GridFor(rows * cols), 256, 0, stream, y, yt, bias, rows, cols);
  CheckLaunch("AddBias");
}

void GatherRows(const void* src, int64_t row_bytes, const int32_t* index, int64_t n, void* dst,
                cudaStream_t stream) {
  if (n <= 0) return;
  const bool wide = row_bytes % 16 == 0 && Aligned16(src) && Aligned16(dst);
  const int64_t units = wide ? row_bytes / 16 : row_bytes / 2;
  const dim3 grid(static_cast<unsigned>(n),
                  static_cast<unsigned>(std::min<int64_t>((units + 255) / 256, 8)));
  if (wide)
    LaunchAfterPrior(GatherKernel<uint4>, grid, 256, 0, stream, static_cast<const uint4*>(src),
                     units, index, static_cast<uint4*>(dst));
  else
    LaunchAfterPrior(GatherKernel<uint16_t>, grid, 256, 0, stream,
                     static_cast<const uint16_t*>(src), units, index, static_cast<uint16_t*>(dst));
  CheckLaunch("GatherRows");
}

}  // namespace m3::kernels::cuda
