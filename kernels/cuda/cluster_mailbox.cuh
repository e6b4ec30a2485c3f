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
// barriers) right after the init, and waits only before its first remote store.
__device__ __forceinline__ void ClusterArriveRelaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void ClusterWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
}

// One thread per CTA, before ClusterArriveRelaxed: the barrier expects `bytes` in its phase 0
// (its one arrival made here, so the phase completes when the last byte lands).
__device__ __forceinline__ void MailboxInit(float* box, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t bar = SharedAddress(box) - 16;
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
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

// Stores v into CTA `rank`'s mailbox at the offset `at` has in this CTA's (both mailboxes start
// at the same shared address).
__device__ __forceinline__ void MailboxPush(float* box, float* at, float v, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n" ::"r"(
                   RemoteAddress(at, rank)),
               "f"(v), "r"(RemoteAddress(box, rank) - 16)
               : "memory");
#endif
}
__device__ __forceinline__ void MailboxPush(float* box, float* at, float4 v, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(RemoteAddress(at, rank)),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(RemoteAddress(box, rank) - 16)
      : "memory");
#endif
}

// Until every expected byte has landed in this CTA's mailbox.
__device__ __forceinline__ void MailboxWait(float* box) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t bar = SharedAddress(box) - 16;
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar)
        : "memory");
  }
#endif
}
#endif

}  // namespace m3::kernels::cuda
