// m3-probe-kv-block-copy: a probe of the batch-1 MSA decode attention's key/value copies
// (docs/perf-log, "The selecting attention phase by phase in SM cycles" and "The last leads for
// 128K batch 1"): thread blocks of 128 threads each copy one selected block of keys and values of
// one KV head (256 B a key, at the cache's 1 KB stride of 4 KV heads, or contiguous as a head-major
// layout would hold them) into shared memory, 64 blocks of 128 keys or 128 blocks of 64 keys (4 MB
// either way), by 16-byte cp.async (as kernels/cuda/paged_decode_attention.cu), by one bulk copy
// (TMA, mbarrier) per 256-B row, or by four TMA tensor boxes (64 dims x the keys, 128-byte swizzle)
// for K and V.
//
// Prints, per way, the kernel time and the median over the blocks of the cycles from the first
// copy issued to the last byte in: from HBM after a 256 MB memset (L2 full of dirty lines, whose
// write-backs the copy then waits behind), from HBM after reading 256 MB (L2 full of clean lines,
// as after the index scan), and from L2 (right after the same copy).
//
// m3-probe-kv-block-copy (a CMake target of CUDA builds); run it on the GPU machine, no arguments.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kPageKeys = 128, kD = 128, kHeads = 4, kThreads = 128, kPages = 1024;
constexpr int kRowBytes = kD * 2;                               // one key of one head, bf16
constexpr int kSmem = 2 * kPageKeys * (kRowBytes + 16) + 1024;  // K and V, padded rows; alignment
constexpr size_t kCacheBytes = size_t{kPages} * kPageKeys * kHeads * kRowBytes;

enum Way { kCpAsyncStrided, kBulkStrided, kCpAsyncContiguous, kTmaBoxes, kWays };
const char* const kWayNames[kWays] = {"cp.async 16 B, 1 KB stride", "bulk copy per 256 B row",
                                      "cp.async 16 B, contiguous", "TMA 4 boxes (64 dims x keys)"};

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Until the transaction barrier's first phase completes (every byte expected has arrived).
__device__ __forceinline__ void WaitPhase0(uint64_t* bar) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(SmemAddr(bar))
        : "memory");
}

// The box of `map` at element column x, row y into dst, completing on bar.
__device__ __forceinline__ void LoadBox(void* dst, const CUtensorMap* map, int x, int y,
                                        uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(SmemAddr(bar))
      : "memory");
}

// Block b copies keys [half * keys, (half + 1) * keys) of page page_of[b % 64], head b % 4.
__global__ void __launch_bounds__(kThreads)
    CopyBlock(const uint8_t* k, const uint8_t* v, const int32_t* page_of, int way, int keys,
              long long* cycles, float* sink, const __grid_constant__ CUtensorMap kmap,
              const __grid_constant__ CUtensorMap vmap) {
  extern __shared__ __align__(128) uint8_t sm_raw[];
  // The 128-byte swizzle's pattern repeats every 1024 bytes: the tiles start on such a boundary.
  uint8_t* sm = sm_raw + ((1024 - (SmemAddr(sm_raw) & 1023)) & 1023);
  __shared__ __align__(8) uint64_t bar;
  const int tid = static_cast<int>(threadIdx.x);
  const int page = page_of[blockIdx.x % 64], half = static_cast<int>(blockIdx.x) / 64;
  const int g = static_cast<int>(blockIdx.x) % kHeads;
  auto row_offset = [&](int key) -> size_t {  // key within the page
    return way == kCpAsyncContiguous
               ? (static_cast<size_t>(page) * kPageKeys * kHeads + g * kPageKeys + key) * kRowBytes
               : (static_cast<size_t>(page) * kPageKeys + key) * kHeads * kRowBytes + g * kRowBytes;
  };
  if (tid == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(SmemAddr(&bar)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const long long t0 = clock64();
  if (way == kTmaBoxes) {
    if (tid == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(SmemAddr(&bar)),
                   "r"(2 * keys * kRowBytes)
                   : "memory");
      const int y = page * kPageKeys + half * keys;
      for (int h = 0; h < 2; ++h) {
        LoadBox(sm + h * keys * 128, &kmap, g * kD + h * 64, y, &bar);
        LoadBox(sm + (2 + h) * keys * 128, &vmap, g * kD + h * 64, y, &bar);
      }
    }
    WaitPhase0(&bar);
  } else if (way == kBulkStrided) {
    if (tid == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(SmemAddr(&bar)),
                   "r"(2 * keys * kRowBytes)
                   : "memory");
    __syncthreads();
    for (int key = tid; key < keys; key += kThreads) {
      const size_t off = row_offset(half * keys + key);
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
          "[%3];" ::"r"(SmemAddr(sm + key * (kRowBytes + 16))),
          "l"(k + off), "r"(kRowBytes), "r"(SmemAddr(&bar))
          : "memory");
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
          "[%3];" ::"r"(SmemAddr(sm + (kPageKeys + key) * (kRowBytes + 16))),
          "l"(v + off), "r"(kRowBytes), "r"(SmemAddr(&bar))
          : "memory");
    }
    WaitPhase0(&bar);
  } else {
    // Lane l of a warp: chunk l % 16 of one of two keys a step, the warp's quarter of the keys.
    const int warp = tid / 32, lane = tid % 32;
    for (int i = 0; i < keys / 8; ++i) {
      const int key = warp * (keys / 4) + 2 * i + lane / 16, chunk = lane % 16;
      const size_t off = row_offset(half * keys + key) + chunk * 16;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                       SmemAddr(sm + key * (kRowBytes + 16) + chunk * 16)),
                   "l"(k + off));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                       SmemAddr(sm + (kPageKeys + key) * (kRowBytes + 16) + chunk * 16)),
                   "l"(v + off));
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
  }
  __syncthreads();
  const long long t1 = clock64();
  float acc = 0.0f;  // the copies are used
  for (int i = tid; i < (kSmem - 1024) / 4; i += kThreads)
    acc += reinterpret_cast<const float*>(sm)[i];
  if (acc == 12345.0f) *sink = acc;
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
}

// Reads a buffer (so L2 ends full of clean lines, as after the index scan's reads).
__global__ void ReadAll(const uint4* p, size_t n, float* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    acc ^= p[i].x;
  if (acc == 0x12345u) *sink = 1.0f;
}

// The cache as [slots][heads * 128] bf16, boxes of 64 dims x rows, 128-byte swizzle.
bool MakeMap(const void* base, uint32_t rows, CUtensorMap* out) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (encode == nullptr) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      return false;
    encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }
  const cuuint64_t dims[2] = {kHeads * kD, uint64_t{kPages} * kPageKeys};
  const cuuint64_t strides[1] = {kHeads * kRowBytes};
  const cuuint32_t box[2] = {64, rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode(out, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides,
                box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  uint8_t *k = nullptr, *v = nullptr, *flush = nullptr;
  int32_t* page_of = nullptr;
  long long* cycles = nullptr;
  float* sink = nullptr;
  constexpr size_t kFlush = size_t{256} << 20;
  if (!Ok(cudaMalloc(&k, kCacheBytes), "k") || !Ok(cudaMalloc(&v, kCacheBytes), "v") ||
      !Ok(cudaMalloc(&flush, kFlush), "flush") || !Ok(cudaMalloc(&page_of, 64 * 4), "pages") ||
      !Ok(cudaMalloc(&cycles, 128 * 8), "cycles") || !Ok(cudaMalloc(&sink, 4), "sink"))
    return 1;
  cudaMemset(k, 0, kCacheBytes);
  cudaMemset(v, 0, kCacheBytes);
  std::vector<int32_t> pages(64);
  for (int i = 0; i < 64; ++i) pages[i] = (i * 389 + 17) % kPages;  // scattered pages
  cudaMemcpy(page_of, pages.data(), 64 * 4, cudaMemcpyHostToDevice);
  cudaFuncSetAttribute(CopyBlock, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int pass = 0; pass < 2; ++pass)  // the first pass warms up
    for (int way = 0; way < kWays; ++way)
      for (int blocks = 64; blocks <= 128; blocks += 64) {
        if (way == kBulkStrided && blocks == 128) continue;
        const int keys = 64 * kPageKeys / blocks;
        CUtensorMap kmap{}, vmap{};
        if (!MakeMap(k, keys, &kmap) || !MakeMap(v, keys, &vmap)) {
          std::fprintf(stderr, "tensor maps\n");
          return 1;
        }
        for (int from = 0; from < 3; ++from) {  // HBM after a memset, HBM after reads, L2
          std::vector<double> us, median_cycles;
          for (int rep = 0; rep < 9; ++rep) {
            if (from == 2)
              CopyBlock<<<blocks, kThreads, kSmem>>>(k, v, page_of, way, keys, cycles, sink, kmap,
                                                     vmap);
            else if (from == 1)
              ReadAll<<<264, 512>>>(reinterpret_cast<const uint4*>(flush), kFlush / 16, sink);
            else
              cudaMemset(flush, rep, kFlush);
            cudaEventRecord(a);
            CopyBlock<<<blocks, kThreads, kSmem>>>(k, v, page_of, way, keys, cycles, sink, kmap,
                                                   vmap);
            cudaEventRecord(b);
            if (!Ok(cudaEventSynchronize(b), "run")) return 1;
            float ms = 0.0f;
            cudaEventElapsedTime(&ms, a, b);
            us.push_back(ms * 1000.0);
            std::vector<long long> c(blocks);
            cudaMemcpy(c.data(), cycles, blocks * 8, cudaMemcpyDeviceToHost);
            std::sort(c.begin(), c.end());
            median_cycles.push_back(static_cast<double>(c[blocks / 2]));
          }
          std::sort(us.begin(), us.end());
          std::sort(median_cycles.begin(), median_cycles.end());
          if (pass == 1)
            std::printf("%-28s %3d blocks x %2d KB from %s: kernel %.2f us, copy %.0f cycles\n",
                        kWayNames[way], blocks, 2 * keys * kRowBytes / 1024,
                        from == 2   ? "L2       "
                        : from == 1 ? "HBM, read"
                                    : "HBM, set ",
                        us[4], median_cycles[4]);
        }
      }
  return Ok(cudaDeviceSynchronize(), "probe") ? 0 : 1;
}
