// A probe of the batch-1 MSA decode attention's key/value copies (PERF.md, "The selecting
// attention phase by phase in SM cycles"): thread blocks of 128 threads each copy one selected
// block of keys and values of one KV head (256 B a key, at the cache's 1 KB stride of 4 KV heads,
// or contiguous as a head-major layout would hold them) into padded shared rows, 64 blocks of 128
// keys or 128 blocks of 64 keys (4 MB either way), by 16-byte cp.async (as
// kernels/cuda/paged_decode_attention.cu) or by one bulk copy (TMA, mbarrier) per 256-B row.
// Prints, per way, the kernel time and the median over the blocks of the cycles from the first
// copy issued to the last byte in: from HBM (after a 256 MB memset) and from L2 (right after the
// same copy).
// Build and run on the GPU machine: nvcc -std=c++17 -O3 -arch=sm_90 -o /tmp/kvprobe
//   scripts/device/kv_block_copy_probe.cu && /tmp/kvprobe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kPageKeys = 128, kD = 128, kHeads = 4, kThreads = 128, kPages = 1024;
constexpr int kRowBytes = kD * 2;                        // one key of one head, bf16
constexpr int kSmem = 2 * kPageKeys * (kRowBytes + 16);  // K and V, padded rows
constexpr size_t kCacheBytes = size_t{kPages} * kPageKeys * kHeads * kRowBytes;

enum Way { kCpAsyncStrided, kBulkStrided, kCpAsyncContiguous, kWays };
const char* const kWayNames[kWays] = {"cp.async 16 B, 1 KB stride", "bulk copy per 256 B row",
                                      "cp.async 16 B, contiguous"};

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Block b copies keys [half * keys, (half + 1) * keys) of page page_of[b % 64], head b % 4.
__global__ void __launch_bounds__(kThreads)
    CopyBlock(const uint8_t* k, const uint8_t* v, const int32_t* page_of, int way, int keys,
              long long* cycles, float* sink) {
  extern __shared__ __align__(128) uint8_t sm[];
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
  if (way == kBulkStrided) {
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
    uint32_t done = 0;
    while (!done)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(SmemAddr(&bar))
          : "memory");
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
  for (int i = tid; i < kSmem / 4; i += kThreads) acc += reinterpret_cast<const float*>(sm)[i];
  if (acc == 12345.0f) *sink = acc;
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
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
        for (int from_l2 = 0; from_l2 < 2; ++from_l2) {
          std::vector<double> us, median_cycles;
          for (int rep = 0; rep < 9; ++rep) {
            if (from_l2)
              CopyBlock<<<blocks, kThreads, kSmem>>>(k, v, page_of, way, keys, cycles, sink);
            else
              cudaMemset(flush, rep, kFlush);
            cudaEventRecord(a);
            CopyBlock<<<blocks, kThreads, kSmem>>>(k, v, page_of, way, keys, cycles, sink);
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
                        from_l2 ? "L2 " : "HBM", us[4], median_cycles[4]);
        }
      }
  return Ok(cudaDeviceSynchronize(), "probe") ? 0 : 1;
}
