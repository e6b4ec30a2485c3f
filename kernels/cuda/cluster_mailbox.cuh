// A thread-block cluster's mailbox (Hopper): a region of each CTA's shared memory that the
// cluster's other CTAs fill with asynchronous remote stores (st.async), each counting its bytes
// down on the owner's transaction barrier (mbarrier). The owner waits for exactly the bytes it
// expects and reads them locally: one one-way trip through the cluster instead of a cluster
// barrier, remote loads and a second barrier that keeps every CTA alive until the others
// finished reading it. The barrier sits in the 16 bytes before the mailbox.
#pragma once

#include <cstdint>

namespace m3::kernels::cuda {

#ifdef __CUDACC__
__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Every thread of the cluster arrives (no ordering of its own: MailboxInit's fence publishes the
// barriers) right after the init, and waits only before its first remote store. Not the
// warp-aligned forms: callers reach them after lane-divergent code, where an aligned cluster
// barrier is undefined (compute-sanitizer synccheck).
__device__ __forceinline__ void ClusterArriveRelaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void ClusterWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait;\n" ::: "memory");
#endif
}

// The mailbox's transaction barrier, in the 16 bytes before it.
__device__ __forceinline__ uint32_t MailboxBarrier(const float* box) {
  return SharedAddress(box) - 16;
}

// One thread per CTA, before ClusterArriveRelaxed: a barrier that every one of the CTA's
// `threads` arrives on in MailboxWait.
__device__ __forceinline__ void MailboxInit(float* box, uint32_t threads) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t bar = MailboxBarrier(box);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(threads) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// The shared::cluster address of CTA `rank`'s copy of this CTA's shared `local`.
__device__ __forceinline__ uint32_t RemoteAddress(const void* local, int rank) {
  uint32_t remote = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(SharedAddress(local)), "r"(rank));
#endif
  return remote;
}

// Stores the 16 bytes v into CTA `rank`'s mailbox at the offset `at` has in this CTA's (both
// mailboxes start at the same shared address; a CTA's shared::cluster window is contiguous, so
// one mapping gives the mailbox and its barrier).
__device__ __forceinline__ void MailboxPush(float* box, float* at, float4 v, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t remote_box = RemoteAddress(box, rank);
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(remote_box + (SharedAddress(at) - SharedAddress(box))),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(remote_box - 16)
      : "memory");
#endif
}

// Every thread of the CTA: until all `bytes` the CTA expects have landed in its mailbox (thread
// 0's arrival declares them; remote stores may land before it, the count going below zero
// meanwhile). Each thread waits on the token of its own arrival.
__device__ __forceinline__ void MailboxWait(float* box, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t bar = MailboxBarrier(box);
  uint64_t token = 0;
  if (threadIdx.x == 0)
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;\n"
                 : "=l"(token)
                 : "r"(bar), "r"(bytes)
                 : "memory");
  else
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];\n" : "=l"(token) : "r"(bar) : "memory");
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "l"(token)
        : "memory");
  }
#endif
}

// Every thread of the CTA, once done with the mailbox: the barrier is invalidated before the
// CTA's shared memory passes to the next CTA on the SM (PTX: an mbarrier must be invalidated
// before its memory is used for anything else), after every thread's wait on it.
__device__ __forceinline__ void MailboxRetire(float* box) {
  __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0)
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(MailboxBarrier(box)) : "memory");
#endif
}
#endif

}  // namespace m3::kernels::cuda
