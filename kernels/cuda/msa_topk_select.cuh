// The MSA top-k's ordering and selection steps, shared by the top-k kernels (msa_index_topk.cu)
// and by kernels that select a row's blocks themselves before they use them (BlockTopK: the
// decode attention selecting from the indexer's block scores).
// A score becomes a 32-bit key (order-preserving float bits inverted: ascending key =
// descending score) and a block its composite (key << 32 | block): composites are distinct,
// and ascending composites are IndexTopK's order (ties to the lower block).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

#ifdef __CUDACC__
__device__ __forceinline__ uint32_t AscKey(float v) {
  const uint32_t bits = __float_as_uint(v);
  return ~((bits & 0x80000000u) ? ~bits : bits | 0x80000000u);
}

// A block's composite: its score's key above, its index below.
__device__ __forceinline__ uint64_t Composite(uint32_t key, uint32_t index) {
  return (uint64_t{key} << 32) | index;
}

// Output slot i of a selection from its ascending composite: -1 past k and for -inf scores.
__device__ __forceinline__ int32_t Emitted(int i, int k, uint64_t x) {
  return i < k && static_cast<uint32_t>(x >> 32) != AscKey(-INFINITY)
             ? static_cast<int32_t>(x & 0xffffffffu)
             : -1;
}

// One radix-select step, by one warp over a 256-bin histogram of the candidates' next digit:
// the digit whose bin holds the want-th smallest, how many candidates fall below that bin, and
// how many are in it.
struct RadixDigit {
  int digit = 0;
  uint32_t below = 0, in_bin = 0;
};
__device__ __forceinline__ RadixDigit FindRadixDigit(const uint32_t* hist, int want, int lane) {
  uint32_t c[8], total = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    c[e] = hist[lane * 8 + e];
    total += c[e];
  }
  uint32_t incl = total;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  const uint32_t excl = incl - total;
  const uint32_t w = static_cast<uint32_t>(want);
  const int src = __ffs(__ballot_sync(0xffffffffu, excl < w && w <= incl)) - 1;
  RadixDigit d;
  d.below = excl;
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (d.in_bin == 0 && d.below + c[e] >= w && c[e] > 0) {
      d.digit = lane * 8 + e;
      d.in_bin = c[e];
    } else if (d.in_bin == 0) {
      d.below += c[e];
    }
  d.digit = __shfl_sync(0xffffffffu, d.digit, src);
  d.below = __shfl_sync(0xffffffffu, d.below, src);
  d.in_bin = __shfl_sync(0xffffffffu, d.in_bin, src);
  return d;
}

// Shared memory of BlockTopK besides the keys and the survivors.
template <int kThreads>
struct BlockTopKScratch {
  uint64_t mins[kThreads];
  uint64_t threshold;
  int count;
};

// IndexTopK's selection of one row, made by one whole thread block of kThreads threads: the
// k = min(topk, n) smallest composites of blocks [0, n) (blocks from first_local on count as
// +inf), written to out[0, topk) in ascending order as block indices (-1 past k and for -inf
// scores). Shared memory: keys (n words) and survivors (up to n composites); topk <= kThreads,
// kThreads a multiple of 64. The k-th smallest of the threads' (or four-lane groups') minima
// bounds the selection (the k holding the k smallest minima have a key at or below it each,
// and every key at or below it is one of theirs), so only those keys are ranked against each
// other: three block barriers, and on a row's scores a few dozen survivors (a radix select's
// passes took several times longer in a 128-thread block). Ends with a barrier: out is visible.
template <int kThreads>
__device__ void BlockTopK(const float* row, int n, int first_local, int topk, uint32_t* keys,
                          uint64_t* survivors, BlockTopKScratch<kThreads>& sc, int32_t* out) {
  static_assert(kThreads % 64 == 0 && kThreads <= 1024, "whole warps, at least topk");
  const int tid = static_cast<int>(threadIdx.x);
  uint64_t mine = ~uint64_t{0};
  // Eight scores a thread in flight at once (the stores to keys would otherwise hold each load
  // back until the previous key is stored: one L2 round trip per score).
  constexpr int kBatch = 8;
  // The thread's first kBatch keys also stay in registers: where they are all of its keys (n <=
  // kBatch * kThreads), the survivors below are found without reading keys back (two loops of
  // dependent shared loads per surviving thread: 128K batch 1, that step 870 -> 470 cycles).
  uint32_t held[kBatch] = {};
  for (int i0 = tid; i0 < n; i0 += kBatch * kThreads) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = i0 + j * kThreads;
      v[j] = i < n && i < first_local ? row[i] : INFINITY;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = i0 + j * kThreads;
      if (i < n) {
        const uint32_t key = AscKey(v[j]);
        keys[i] = key;
        if (i0 == tid) held[j] = key;
        const uint64_t c = Composite(key, static_cast<uint32_t>(i));
        mine = c < mine ? c : mine;
      }
    }
  }
  const int k = topk < n ? topk : n;
  // Four lanes share one minimum where at least k groups of them hold keys: a quarter of the
  // minima to rank, each by its four lanes against a quarter of them.
  const int holders = n < kThreads ? n : kThreads;
  const bool grouped = k <= (holders + 3) / 4;
  uint64_t least = mine;
  if (grouped)
    for (int o = 1; o < 4; o <<= 1) {
      const uint64_t other = __shfl_xor_sync(0xffffffffu, least, o);
      least = other < least ? other : least;
    }
  const bool owner = !grouped || (tid & 3) == 0;
  if (owner) sc.mins[grouped ? tid / 4 : tid] = least;
  if (tid == 0) sc.count = 0;
  __syncthreads();
  int rank = 0;
  if (grouped) {
    constexpr int kPart = kThreads / 16;
    const uint64_t* part = sc.mins + (tid & 3) * kPart;
#pragma unroll
    for (int j = 0; j < kPart; j += 2) {
      const ulonglong2 two = *reinterpret_cast<const ulonglong2*>(&part[j]);
      rank += (two.x < least ? 1 : 0) + (two.y < least ? 1 : 0);
    }
    rank += __shfl_xor_sync(0xffffffffu, rank, 1);
    rank += __shfl_xor_sync(0xffffffffu, rank, 2);
  } else {
#pragma unroll 8
    for (int j = 0; j < kThreads; j += 2) {
      const ulonglong2 two = *reinterpret_cast<const ulonglong2*>(&sc.mins[j]);
      rank += (two.x < least ? 1 : 0) + (two.y < least ? 1 : 0);
    }
  }
  // Minima of threads or groups without keys rank past every key's.
  if (owner && rank == k - 1) sc.threshold = least;
  __syncthreads();
  const uint64_t bound = sc.threshold;
  // Survivors only among threads whose minimum is at or below the bound; one atomic each.
  if (mine <= bound && n <= kBatch * kThreads) {
    int own = 0;
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = tid + j * kThreads;
      own += i < n && Composite(held[j], static_cast<uint32_t>(i)) <= bound ? 1 : 0;
    }
    int at = atomicAdd(&sc.count, own);
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = tid + j * kThreads;
      const uint64_t c = Composite(held[j], static_cast<uint32_t>(i));
      if (i < n && c <= bound) survivors[at++] = c;
    }
  } else if (mine <= bound) {
    int own = 0;
    for (int i = tid; i < n; i += kThreads)
      own += Composite(keys[i], static_cast<uint32_t>(i)) <= bound ? 1 : 0;
    int at = atomicAdd(&sc.count, own);
    for (int i = tid; i < n; i += kThreads) {
      const uint64_t c = Composite(keys[i], static_cast<uint32_t>(i));
      if (c <= bound) survivors[at++] = c;
    }
  }
  __syncthreads();
  const int m = sc.count;
  for (int s = tid; s < m; s += kThreads) {
    const uint64_t c = survivors[s];
    int r = 0;
#pragma unroll 4
    for (int j = 0; j < m; ++j) r += survivors[j] < c ? 1 : 0;
    if (r < k) out[r] = Emitted(r, k, c);
  }
  for (int i = k + tid; i < topk; i += kThreads) out[i] = -1;
  __syncthreads();
}
#endif

}  // namespace m3::kernels::cuda
