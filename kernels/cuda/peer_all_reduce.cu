// The one-shot peer all-reduce kernels (peer_all_reduce.cuh).
//
// Design. Rank r's call k of the group (plain or fused, they share the sequence) is one kernel
// launch on r's stream. Its epoch e = k + 1 is not a launch argument but read from r's control
// word in device memory and advanced by the kernel itself when its last block leaves, so a
// recorded CUDA graph replays correctly: a captured launch never runs at capture time and
// every replay reads the epoch the previous call left. Each block b of a launch owns the same
// slice of the message on every rank (every rank launches the same grid for the same shape):
//   1. copy its slice of the rank's input into staging half (e & 1) of the rank's buffer;
//   2. __syncthreads, then thread t (t < world, t != r) writes e into peer t's flag
//      [b][r] with st.release.sys (the barrier orders the block's staging stores before it,
//      release makes them visible to the peer before the flag), and spins with ld.acquire.sys
//      on its own flag [b][t] until it holds e or later (epochs only grow; compared as a signed
//      difference, so the counter may wrap), then __syncthreads publishes the acquire to the
//      block;
//   3. read the slice from every rank's staging (its own locally, the peers' over NVLink with
//      L1-bypassing loads) and sum in rank order 0 + 1 + ... in float32, rounding once;
//   4. thread 0 counts the block out (atom.acq_rel); the last block out stores e as the epoch
//      (every block read the epoch before counting out, so none reads the new one).
// Reuse. Rank r's call e + 2 overwrites staging half (e & 1) and may do so before it waits.
// That is safe: r's call e + 1 completed before call e + 2 started (one stream), and in it
// every block waited for each peer's twin block to arrive in call e + 1, which that peer's
// kernel could only do after its call e kernel had completed, reads of r's staging included.
// One barrier per call therefore suffices, with two staging halves. The flags need no reset:
// a flag only ever grows, and a waiter accepts any epoch >= its own.
// Deadlock freedom. Every rank launches the same calls in the same order with the same grids
// (the host picks this path or NCCL from the shape alone); a launch has at most
// kPeerMaxBlocks blocks, all resident at once, so a spinning block never keeps a peer's twin
// from running. Chained launches (ChainedKernelStart) keep this: a kernel's dependents start
// only once all its blocks have, and they wait before touching memory. A rank that fails and
// never launches would leave its peers spinning: the host sets the abort word (host-mapped
// memory, read every 1024 spins), the waiters give up, and the group refuses later calls.
// Order. NCCL sums bf16 in its ring order with a rounding after each hop; here the float32 sum
// in rank order is rounded once. With 2 ranks the two agree bit for bit (a + b, rounded once);
// with more they differ within bf16 rounding. The fused kernel rounds the sum to bf16 before
// adding it to the residual, as the unfused path (all-reduce into a bf16 tensor, then
// AddRmsNormGemma) does, with the same per-thread element mapping and block reduction as
// rms_norm.cu's register kernel: the two paths give identical bits.
#include "kernels/cuda/peer_all_reduce.cuh"

#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/bf16x8.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kSumThreads = 512;
constexpr int kSumUnroll = 2;  // packs a thread loads from every rank before summing any
// The fused kernel's rows are held in registers as in rms_norm.cu's AddRmsNormVecKernel (the
// same thread count and element mapping, so its block sums add in the same order).
constexpr int kNormThreads = 256;
constexpr int kNormMaxVec = 4;
constexpr uint32_t kAbortPollMask = 1023;

__device__ __forceinline__ void StoreRelease(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t LoadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t AddAcqRel(uint32_t* p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;"
               : "=r"(old)
               : "l"(p), "r"(v)
               : "memory");
  return old;
}

// The epoch of this call, the same for every block (see Depart).
__device__ __forceinline__ uint32_t BeginCall(const PeerAllReduceRanks& p) {
  __shared__ uint32_t epoch;
  if (threadIdx.x == 0) epoch = *reinterpret_cast<volatile uint32_t*>(p.control) + 1;
  __syncthreads();
  return epoch;
}

// Rank `rank`'s staging half for epoch e, as 16-byte packs.
__device__ __forceinline__ uint4* Staging(const PeerAllReduceRanks& p, int rank, uint32_t e) {
  return reinterpret_cast<uint4*>(static_cast<char*>(p.staging[rank]) +
                                  static_cast<int64_t>(e & 1u) * p.staging_bytes);
}

// Step 2: this block's staging is filled; tell the peers' twin blocks and wait for theirs.
__device__ __forceinline__ void Arrive(const PeerAllReduceRanks& p, uint32_t e) {
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x);
  if (t < p.world && t != p.rank) {
    StoreRelease(p.flags[t] + blockIdx.x * kPeerMaxRanks + p.rank, e);
    const uint32_t* mine = p.flags[p.rank] + blockIdx.x * kPeerMaxRanks + t;
    for (uint32_t spins = 1; static_cast<int32_t>(LoadAcquire(mine) - e) < 0; ++spins)
      if ((spins & kAbortPollMask) == 0 && *p.abort != 0) break;
  }
  __syncthreads();
}

// Step 4: the last block out advances the epoch.
__device__ __forceinline__ void Depart(const PeerAllReduceRanks& p, uint32_t e) {
  if (threadIdx.x != 0) return;
  if (AddAcqRel(p.control + 1, 1u) == gridDim.x - 1) {
    volatile uint32_t* c = p.control;
    c[1] = 0;
    c[0] = e;
  }
}

// Pack i (16 bytes) of p, which need not be 16-byte aligned when !aligned.
__device__ __forceinline__ uint4 LoadPack(const void* p, int64_t i, bool aligned) {
  if (aligned) return static_cast<const uint4*>(p)[i];
  uint4 v;
  const unsigned char* s = static_cast<const unsigned char*>(p) + i * 16;
  unsigned char* d = reinterpret_cast<unsigned char*>(&v);
#pragma unroll
  for (int k = 0; k < 16; ++k) d[k] = s[k];
  return v;
}
__device__ __forceinline__ void StorePack(void* p, int64_t i, const uint4& v, bool aligned) {
  if (aligned) {
    static_cast<uint4*>(p)[i] = v;
    return;
  }
  unsigned char* d = static_cast<unsigned char*>(p) + i * 16;
  const unsigned char* s = reinterpret_cast<const unsigned char*>(&v);
#pragma unroll
  for (int k = 0; k < 16; ++k) d[k] = s[k];
}

// The element types of a pack: 8 bf16 or 4 float32.
template <typename T>
struct Pack;
template <>
struct Pack<bf16> {
  static constexpr int kN = 8;
  __device__ static void Unpack(const uint4& v, float* f) { Unpack8(v, f); }
  __device__ static uint4 Round(const float* f) {
    uint4 v;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    return v;
  }
};
template <>
struct Pack<float> {
  static constexpr int kN = 4;
  __device__ static void Unpack(const uint4& v, float* f) {
    f[0] = __uint_as_float(v.x);
    f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z);
    f[3] = __uint_as_float(v.w);
  }
  __device__ static uint4 Round(const float* f) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                      __float_as_uint(f[3]));
  }
};

// Step 3, the loads: pack i of this call's staging of every rank (its own locally, the peers'
// over NVLink, bypassing L1). W: the group's size, or kPeerMaxRanks for sizes without their
// own instance (ranks at or past p.world are skipped). Callers issue every load a thread needs
// before the first add, so a thread waits for one NVLink round trip, not one per pack.
template <int W>
__device__ __forceinline__ void LoadRanks(const PeerAllReduceRanks& p, uint32_t e, int64_t i,
                                          uint4 (&v)[W]) {
#pragma unroll
  for (int r = 0; r < W; ++r)
    if (r < p.world) {
      const uint4* s = Staging(p, r, e) + i;
      v[r] = r == p.rank ? *s : __ldcg(s);
    }
}

// Step 3, the sum: in rank order, in float32.
template <typename T, int W>
__device__ __forceinline__ void AddRanks(const PeerAllReduceRanks& p, const uint4 (&v)[W],
                                         float (&acc)[Pack<T>::kN]) {
  Pack<T>::Unpack(v[0], acc);
#pragma unroll
  for (int r = 1; r < W; ++r)
    if (r < p.world) {
      float f[Pack<T>::kN];
      Pack<T>::Unpack(v[r], f);
#pragma unroll
      for (int k = 0; k < Pack<T>::kN; ++k) acc[k] += f[k];
    }
}

template <typename T, int W>
__global__ void __launch_bounds__(kSumThreads)
    PeerSumKernel(PeerAllReduceRanks p, void* data, int64_t packs, bool aligned) {
  ChainedKernelStart();
  const uint32_t e = BeginCall(p);
  const int64_t per = (packs + gridDim.x - 1) / gridDim.x;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * per;
  const int64_t first = start < packs ? start : packs;
  const int64_t last = first + per < packs ? first + per : packs;
  uint4* mine = Staging(p, p.rank, e);
  for (int64_t i = first + threadIdx.x; i < last; i += blockDim.x)
    mine[i] = LoadPack(data, i, aligned);
  Arrive(p, e);
  const int64_t stride = int64_t{kSumUnroll} * blockDim.x;
  for (int64_t base = first + threadIdx.x; base < last; base += stride) {
    uint4 v[kSumUnroll][W];
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u) {
      const int64_t i = base + int64_t{u} * blockDim.x;
      if (i < last) LoadRanks<W>(p, e, i, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u) {
      const int64_t i = base + int64_t{u} * blockDim.x;
      if (i < last) {
        float acc[Pack<T>::kN];
        AddRanks<T, W>(p, v[u], acc);
        StorePack(data, i, Pack<T>::Round(acc), aligned);
      }
    }
  }
  Depart(p, e);
}

template <int W>
__global__ void __launch_bounds__(kNormThreads)
    PeerAddRmsNormKernel(PeerAllReduceRanks p, const bf16* delta, bf16* residual, int64_t rows,
                         int64_t dim, const float* w, float eps, bf16* out, bool aligned) {
  ChainedKernelStart();
  __shared__ float scratch[32];
  const uint32_t e = BeginCall(p);
  const int64_t n8 = dim / 8;
  uint4* mine = Staging(p, p.rank, e);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)
    for (int64_t i = threadIdx.x; i < n8; i += blockDim.x)
      mine[row * n8 + i] = LoadPack(delta, row * n8 + i, aligned);
  Arrive(p, e);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * n8;
    uint4 v[kNormMaxVec][W], xv[kNormMaxVec];
#pragma unroll
    for (int j = 0; j < kNormMaxVec; ++j) {
      const int64_t i = threadIdx.x + int64_t{j} * kNormThreads;
      if (i < n8) {
        LoadRanks<W>(p, e, base + i, v[j]);
        xv[j] = LoadPack(residual, base + i, aligned);
      }
    }
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < kNormMaxVec; ++j) {
      const int64_t i = threadIdx.x + int64_t{j} * kNormThreads;
      if (i >= n8) break;
      float acc[8], g[8], f[8];
      AddRanks<bf16, W>(p, v[j], acc);
      // The all-reduced delta as a bf16 tensor would hold it.
      Unpack8(Pack<bf16>::Round(acc), g);
      Unpack8(xv[j], f);
#pragma unroll
      for (int k = 0; k < 8; ++k) f[k] += g[k];
      xv[j] = Pack<bf16>::Round(f);
      StorePack(residual, base + i, xv[j], aligned);
      Unpack8(xv[j], f);
#pragma unroll
      for (int k = 0; k < 8; ++k) ss += f[k] * f[k];
    }
    ss = BlockSum(ss, scratch);
    const float inv = rsqrtf(ss / static_cast<float>(dim) + eps);
#pragma unroll
    for (int j = 0; j < kNormMaxVec; ++j) {
      const int64_t i = threadIdx.x + int64_t{j} * kNormThreads;
      if (i >= n8) break;
      float wa[4], wb[4], f[8];
      Pack<float>::Unpack(LoadPack(w, 2 * i, aligned), wa);
      Pack<float>::Unpack(LoadPack(w, 2 * i + 1, aligned), wb);
      const float wf[8] = {wa[0], wa[1], wa[2], wa[3], wb[0], wb[1], wb[2], wb[3]};
      Unpack8(xv[j], f);
#pragma unroll
      for (int k = 0; k < 8; ++k) f[k] = (f[k] * inv) * (1.0f + wf[k]);
      StorePack(out, base + i, Pack<bf16>::Round(f), aligned);
    }
  }
  Depart(p, e);
}

template <int W>
void LaunchSum(const PeerAllReduceRanks& ranks, void* data, ElemType type, int64_t packs,
               unsigned blocks, bool aligned, cudaStream_t stream) {
  if (type == ElemType::kF32)
    LaunchAfterPrior(PeerSumKernel<float, W>, blocks, kSumThreads, 0, stream, ranks, data, packs,
                     aligned);
  else
    LaunchAfterPrior(PeerSumKernel<bf16, W>, blocks, kSumThreads, 0, stream, ranks, data, packs,
                     aligned);
}

template <int W>
void LaunchAddRmsNorm(const PeerAllReduceRanks& ranks, unsigned blocks, cudaStream_t stream,
                      const bf16* delta, bf16* residual, int64_t rows, int64_t dim, const float* w,
                      float eps, bf16* out, bool aligned) {
  LaunchAfterPrior(PeerAddRmsNormKernel<W>, blocks, kNormThreads, 0, stream, ranks, delta, residual,
                   rows, dim, w, eps, out, aligned);
}

}  // namespace

void PeerAllReduceSum(const PeerAllReduceRanks& ranks, void* data, ElemType type, int64_t n,
                      cudaStream_t stream) {
  const int64_t bytes = n * (type == ElemType::kF32 ? 4 : 2);
  if (n <= 0) return;
  if (!(type == ElemType::kF32 || type == ElemType::kBF16) || bytes % 16 != 0 ||
      bytes > ranks.staging_bytes || ranks.world < 1 || ranks.world > kPeerMaxRanks)
    throw std::runtime_error("PeerAllReduceSum: unsupported message");
  const int64_t packs = bytes / 16;
  const unsigned blocks = static_cast<unsigned>(
      std::min<int64_t>(kPeerMaxBlocks, (packs + kSumThreads - 1) / kSumThreads));
  const bool aligned = Aligned16(data);
  // Instances for the group sizes tensor parallelism uses; the rest share the widest.
  if (ranks.world == 2)
    LaunchSum<2>(ranks, data, type, packs, blocks, aligned, stream);
  else if (ranks.world == 4)
    LaunchSum<4>(ranks, data, type, packs, blocks, aligned, stream);
  else
    LaunchSum<kPeerMaxRanks>(ranks, data, type, packs, blocks, aligned, stream);
  CheckLaunch("PeerAllReduceSum");
}

bool PeerAddRmsNormFits(int64_t dim) {
  return dim > 0 && dim % 8 == 0 && dim <= int64_t{kNormThreads} * 8 * kNormMaxVec;
}

void PeerAllReduceAddRmsNorm(const PeerAllReduceRanks& ranks, const bf16* delta, bf16* residual,
                             int64_t rows, int64_t dim, const float* w, float eps, bf16* out,
                             cudaStream_t stream) {
  if (rows <= 0) return;
  if (!PeerAddRmsNormFits(dim) || rows * dim * 2 > ranks.staging_bytes || ranks.world < 1 ||
      ranks.world > kPeerMaxRanks)
    throw std::runtime_error("PeerAllReduceAddRmsNorm: unsupported shape");
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(kPeerMaxBlocks, rows));
  const bool aligned = Aligned16(delta) && Aligned16(residual) && Aligned16(w) && Aligned16(out);
  if (ranks.world == 2)
    LaunchAddRmsNorm<2>(ranks, blocks, stream, delta, residual, rows, dim, w, eps, out, aligned);
  else if (ranks.world == 4)
    LaunchAddRmsNorm<4>(ranks, blocks, stream, delta, residual, rows, dim, w, eps, out, aligned);
  else
    LaunchAddRmsNorm<kPeerMaxRanks>(ranks, blocks, stream, delta, residual, rows, dim, w, eps, out,
                                    aligned);
  CheckLaunch("PeerAllReduceAddRmsNorm");
}

}  // namespace m3::kernels::cuda
