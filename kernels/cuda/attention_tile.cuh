// Warp-level tensor-core attention over one tile of keys, shared by the paged decode and prefill
// kernels: a warp owns 16 query vectors (the M of mma.sync m16n8k16; q heads of one KV group,
// possibly of several rows) as bf16 A fragments, an f32 online-softmax state and an f32 output
// accumulator, and consumes K/V tiles staged in shared memory by cp.async. Scores are kept in
// the log2 domain (scale * log2(e) folded in) so the softmax uses exp2.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda::attn {

#ifdef __CUDACC__

constexpr float kLog2e = 1.4426950408889634f;

// Element offset of 16-byte chunk `chunk` of key `key` in a [keys][D] bf16 shared tile. Chunks
// are XOR-swizzled by key & 7 so the eight row addresses of one ldmatrix hit distinct banks
// (rows are D * 2 bytes apart, a multiple of 128).
template <int D>
__device__ __forceinline__ int TileOffset(int key, int chunk) {
  return key * D + ((chunk ^ (key & 7)) << 3);
}

// The key block slot `slot` of a row's selection list names, or -1 when the slot is ignored:
// empty, starting past the row's position, or a repeat of an earlier slot (the CPU twin's rule).
__device__ __forceinline__ int SelectedBlock(const int32_t* sel, int64_t slot, int64_t pos,
                                             int64_t block_size) {
  const int b = sel[slot];
  if (b < 0 || int64_t{b} * block_size > pos) return -1;
  for (int64_t i = 0; i < slot; ++i)
    if (sel[i] == b) return -1;
  return b;
}

// 16 bytes global -> shared, asynchronously; zero-filled when !valid (src is then not read).
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void Ldmatrix4(uint32_t (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void Ldmatrix4Trans(uint32_t (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// c += a * b for one m16n8k16 bf16 tile with f32 accumulation.
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// One warp's 16 query vectors and their running softmax. Thread (lane) holds, as in the mma
// fragment layouts, rows g = lane / 4 and g + 8 and columns 2 * (lane % 4) (+1) of each 8-wide
// tile; `l` is this thread's share of the row sums (reduced over the quad at the end).
template <int D>
struct WarpState {
  uint32_t q[D / 16][4];
  float acc[D / 8][4];
  float m[2];
  float l[2];
};

// Loads the A fragments: q_lo / q_hi are rows g and g + 8 (null: a zero row).
template <int D>
__device__ __forceinline__ void LoadQ(uint32_t (&q)[D / 16][4], const bf16* q_lo, const bf16* q_hi,
                                      int lane) {
  const int t2 = 2 * (lane & 3);
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const int c = ks * 16 + t2;
    q[ks][0] = q_lo ? *reinterpret_cast<const uint32_t*>(q_lo + c) : 0u;
    q[ks][1] = q_hi ? *reinterpret_cast<const uint32_t*>(q_hi + c) : 0u;
    q[ks][2] = q_lo ? *reinterpret_cast<const uint32_t*>(q_lo + c + 8) : 0u;
    q[ks][3] = q_hi ? *reinterpret_cast<const uint32_t*>(q_hi + c + 8) : 0u;
  }
}

// An empty softmax state and output accumulator.
template <int D>
__device__ __forceinline__ void ResetState(WarpState<D>& w) {
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) w.acc[n][i] = 0.0f;
  w.m[0] = w.m[1] = -INFINITY;
  w.l[0] = w.l[1] = 0.0f;
}

template <int D>
__device__ __forceinline__ void InitState(WarpState<D>& w, const bf16* q_lo, const bf16* q_hi,
                                          int lane) {
  LoadQ<D>(w.q, q_lo, q_hi, lane);
  ResetState<D>(w);
}

// Attends the warp's queries to BN keys of shared tiles sk / sv ([BN][D], TileOffset layout).
// valid(half, key) says whether row g + 8 * half may see tile key `key`; scale_log2 = softmax
// scale * log2(e).
template <int D, int BN, class Valid>
__device__ __forceinline__ void AttendTile(WarpState<D>& w, const bf16* sk, const bf16* sv,
                                           float scale_log2, Valid valid, int lane) {
  static_assert(BN % 16 == 0 && D % 16 == 0 && D >= 64, "tile shapes");
  float s[BN / 8][4];
#pragma unroll
  for (int n = 0; n < BN / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) s[n][i] = 0.0f;
  const int mat = lane >> 3, mrow = lane & 7;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int np = 0; np < BN / 16; ++np) {
      uint32_t b[4];
      Ldmatrix4(b, sk + TileOffset<D>(np * 16 + (mat >> 1) * 8 + mrow, ks * 2 + (mat & 1)));
      Mma(s[2 * np], w.q[ks], b[0], b[1]);
      Mma(s[2 * np + 1], w.q[ks], b[2], b[3]);
    }
  }
  const int t2 = 2 * (lane & 3);
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < BN / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int half = i >> 1, key = n * 8 + t2 + (i & 1);
      s[n][i] = valid(half, key) ? s[n][i] * scale_log2 : -INFINITY;
      mx[half] = fmaxf(mx[half], s[n][i]);
    }
  float corr[2], base[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float m_new = fmaxf(w.m[h], mx[h]);
    // A row with no visible key so far keeps m = -inf: exp2 of (-inf) - (-inf) must not run.
    base[h] = m_new == -INFINITY ? 0.0f : m_new;
    corr[h] = exp2f(w.m[h] - base[h]);
    w.m[h] = m_new;
    w.l[h] *= corr[h];
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    w.acc[n][0] *= corr[0];
    w.acc[n][1] *= corr[0];
    w.acc[n][2] *= corr[1];
    w.acc[n][3] *= corr[1];
  }
#pragma unroll
  for (int n = 0; n < BN / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s[n][i] = exp2f(s[n][i] - base[i >> 1]);
      w.l[i >> 1] += s[n][i];
    }
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    const uint32_t a[4] = {
        PackBf16(s[2 * kk][0], s[2 * kk][1]), PackBf16(s[2 * kk][2], s[2 * kk][3]),
        PackBf16(s[2 * kk + 1][0], s[2 * kk + 1][1]), PackBf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      Ldmatrix4Trans(b, sv + TileOffset<D>(kk * 16 + (mat & 1) * 8 + mrow, dp * 2 + (mat >> 1)));
      Mma(w.acc[2 * dp], a, b[0], b[1]);
      Mma(w.acc[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

// The row sums over the quad; call once, after the last tile.
template <int D>
__device__ __forceinline__ void FinishRowSums(WarpState<D>& w) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    w.l[h] += __shfl_xor_sync(0xffffffffu, w.l[h], 1);
    w.l[h] += __shfl_xor_sync(0xffffffffu, w.l[h], 2);
  }
}

#endif  // __CUDACC__

}  // namespace m3::kernels::cuda::attn
