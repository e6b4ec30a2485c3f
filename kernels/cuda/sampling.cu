// SampleRows: one 512-thread block per row. Sweeps over the row: copy + raw argmax, penalties
// and masks on the copy, argmax of the processed logits; then (sampling rows) radix selection
// for top-k (counts) and top-p (masses), and an id-ordered block scan for the draw. Masses are
// exp((z - zmax) / T) in double, as on the host, rounded to 2^-44 fixed point so every sum is an
// exact integer: the result does not depend on summation order and repeats bit for bit.
#include <cfloat>
#include <climits>
#include <stdexcept>
#include <string>

#include "kernels/cuda/sampling.cuh"
#include "kernels/random_stream.h"

namespace m3::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = kThreads * 4;             // elements per step of an id-ordered scan
constexpr double kFixedOne = 17592186044416.0;  // 2^44
using u64 = unsigned long long;

// Unsigned key ordered as the floats (-0 and +0 equal, as the host compares them); 0 is never
// the key of a number, so it marks "not eligible".
__device__ __forceinline__ uint32_t OrderKey(float f) {
  if (f == 0.0f) f = 0.0f;
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

struct Shared {
  u64 hist[256];
  u64 warp_u64[kWarps];
  double warp_f64[kWarps];
  float warp_val[kWarps];
  int warp_idx[kWarps];
  u64 bcast_u64;
  int bcast_int;
  long long found;
  int top_count;
  int top_ids[kMaxTopLogprobs];
  float top_vals[kMaxTopLogprobs];
};

// Deterministic block reductions (fixed tree); every thread gets the result.
__device__ u64 BlockSumU64(u64 v, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) sh.warp_u64[warp] = v;
  __syncthreads();
  u64 t = 0;
  for (int w = 0; w < kWarps; ++w) t += sh.warp_u64[w];
  __syncthreads();
  return t;
}
__device__ double BlockSumF64(double v, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) sh.warp_f64[warp] = v;
  __syncthreads();
  double t = 0;
  for (int w = 0; w < kWarps; ++w) t += sh.warp_f64[w];
  __syncthreads();
  return t;
}

// (value, index) with the larger value, the lower index on ties: the host's first maximum.
__device__ __forceinline__ bool Better(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);
}
__device__ void BlockArgMax(float& v, int& i, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (Better(ov, oi, v, i)) v = ov, i = oi;
  }
  if (lane == 0) sh.warp_val[warp] = v, sh.warp_idx[warp] = i;
  __syncthreads();
  v = sh.warp_val[0], i = sh.warp_idx[0];
  for (int w = 1; w < kWarps; ++w)
    if (Better(sh.warp_val[w], sh.warp_idx[w], v, i)) v = sh.warp_val[w], i = sh.warp_idx[w];
  __syncthreads();
}

// Exclusive prefix sum over the block in thread order; `total` gets the block's sum.
__device__ u64 BlockExclusiveScan(u64 v, u64& total, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  u64 incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 n = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += n;
  }
  if (lane == 31) sh.warp_u64[warp] = incl;
  __syncthreads();
  u64 before = 0;
  total = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) before += sh.warp_u64[w];
    total += sh.warp_u64[w];
  }
  __syncthreads();
  return before + incl - v;
}

// The first index i (ascending) whose inclusive prefix sum of measure(i) exceeds `thr`; -1 when
// the whole row sums to <= thr.
template <class Measure>
__device__ long long OrderedFind(int64_t vocab, u64 thr, Measure measure, Shared& sh) {
  if (threadIdx.x == 0) sh.found = -1;
  __syncthreads();
  u64 carry = 0;
  for (int64_t base = 0; base < vocab; base += kTile) {
    u64 m[4], local = 0;
    const int64_t first = base + threadIdx.x * 4;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      m[k] = first + k < vocab ? measure(first + k) : 0;
      local += m[k];
    }
    u64 tile_total;
    const u64 before = carry + BlockExclusiveScan(local, tile_total, sh);
    if (before <= thr && before + local > thr) {
      u64 run = before;
      for (int k = 0; k < 4; ++k) {
        run += m[k];
        if (run > thr) {
          sh.found = first + k;
          break;
        }
      }
    }
    __syncthreads();
    const long long f = sh.found;
    if (f >= 0) break;
    carry += tile_total;
  }
  const long long f = sh.found;
  __syncthreads();
  return f;
}

// The element at which the running measure, in the order (key descending, id ascending) over
// the eligible elements (key != 0), first reaches `limit` (>= 1): its key and id. False when the
// eligible elements' measure sums below `limit`.
template <class KeyOf, class Measure>
__device__ bool RadixSelect(int64_t vocab, u64 limit, KeyOf key_of, Measure measure,
                            uint32_t& key_cut, long long& id_cut, Shared& sh) {
  uint32_t prefix = 0, mask = 0;
  u64 above = 0;  // measure of the elements whose key is above the current prefix range
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const uint32_t key = key_of(i);
      if (key == 0 || (key & mask) != prefix) continue;
      const u64 w = measure(i, key);
      if (w) atomicAdd(&sh.hist[(key >> shift) & 255u], w);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int chosen = -1;
      for (int b = 255; b >= 0; --b) {
        if (above + sh.hist[b] >= limit) {
          chosen = b;
          break;
        }
        above += sh.hist[b];
      }
      sh.bcast_int = chosen;
      sh.bcast_u64 = above;
    }
    __syncthreads();
    const int chosen = sh.bcast_int;
    above = sh.bcast_u64;
    __syncthreads();
    if (chosen < 0) return false;
    prefix |= static_cast<uint32_t>(chosen) << shift;
    mask |= 0xFFu << shift;
  }
  key_cut = prefix;
  // Among the elements of that exact key, in id order.
  const uint32_t cut = prefix;
  id_cut = OrderedFind(
      vocab, limit - above - 1,
      [&](int64_t i) -> u64 {
        const uint32_t key = key_of(i);
        return key == cut ? measure(i, key) : 0;
      },
      sh);
  if (id_cut < 0) id_cut = vocab;  // unreachable: the histogram and the scan sum the same integers
  return true;
}

__global__ void __launch_bounds__(kThreads)
    SampleKernel(const float* __restrict__ logits, int64_t vocab,
                 const SampleRowParams* __restrict__ params, const int32_t* __restrict__ hist_tok,
                 const int32_t* __restrict__ hist_cnt, const int32_t* __restrict__ mask_tok,
                 const int32_t* __restrict__ bias_tok, const float* __restrict__ bias_val,
                 const uint32_t* __restrict__ allowed, float* __restrict__ work,
                 SampleRowResult* __restrict__ out) {
  __shared__ Shared sh;
  const int64_t row = blockIdx.x;
  const float* L = logits + row * vocab;
  float* Z = work + row * vocab;
  const SampleRowParams p = params[row];
  const int tid = threadIdx.x;

  // Copy and raw argmax (the fallback when every token is masked).
  float raw_v = -INFINITY;
  int raw_i = INT_MAX;
  for (int64_t i = tid; i < vocab; i += kThreads) {
    const float v = L[i];
    Z[i] = v;
    if (Better(v, static_cast<int>(i), raw_v, raw_i)) raw_v = v, raw_i = static_cast<int>(i);
  }
  BlockArgMax(raw_v, raw_i, sh);  // ends with a barrier: Z is complete for the block
  if (raw_i == INT_MAX) raw_i = 0;

  // logit_bias, penalties on the unique history tokens, then the masks (the host's order).
  for (int j = tid; j < p.bias_count; j += kThreads)
    Z[bias_tok[p.bias_begin + j]] += bias_val[p.bias_begin + j];
  if (p.bias_count > 0) __syncthreads();
  const bool rep = p.repetition_penalty != 1.0;
  for (int j = tid; j < p.history_count; j += kThreads) {
    const int32_t t = hist_tok[p.history_begin + j];
    const int32_t c = hist_cnt[p.history_begin + j];
    float v = Z[t];
    if (rep)
      v = v > 0 ? static_cast<float>(__ddiv_rn(static_cast<double>(v), p.repetition_penalty))
                : static_cast<float>(__dmul_rn(static_cast<double>(v), p.repetition_penalty));
    if (c > 0)
      v -= static_cast<float>(
          __dadd_rn(__dmul_rn(p.frequency_penalty, static_cast<double>(c)), p.presence_penalty));
    Z[t] = v;
  }
  __syncthreads();
  for (int j = tid; j < p.mask_count; j += kThreads) Z[mask_tok[p.mask_begin + j]] = -INFINITY;
  __syncthreads();

  // The allowed-token bitmask is applied in the argmax sweep: each id belongs to one thread.
  const int64_t words = (vocab + 31) / 32;
  const uint32_t* A = p.allowed_row >= 0 ? allowed + p.allowed_row * words : nullptr;
  auto is_allowed = [&](int64_t i) { return A == nullptr || ((A[i >> 5] >> (i & 31)) & 1u); };
  float zmax = -INFINITY;
  int best = INT_MAX;
  for (int64_t i = tid; i < vocab; i += kThreads) {
    if (A != nullptr && !is_allowed(i)) Z[i] = -INFINITY;
    if (Better(Z[i], static_cast<int>(i), zmax, best)) zmax = Z[i], best = static_cast<int>(i);
  }
  BlockArgMax(zmax, best, sh);
  if (best == INT_MAX) best = 0;

  long long token;
  if (zmax == -INFINITY && A != nullptr) {
    // Everything masked under a grammar: the raw argmax among the allowed tokens (0 if none).
    float av = -INFINITY;
    int ai = INT_MAX;
    for (int64_t i = tid; i < vocab; i += kThreads)
      if (is_allowed(i) && (ai == INT_MAX || Better(L[i], static_cast<int>(i), av, ai)))
        av = L[i], ai = static_cast<int>(i);
    BlockArgMax(av, ai, sh);
    token = ai == INT_MAX ? 0 : ai;
  } else if (zmax == -INFINITY) {
    token = raw_i;
  } else if (p.greedy) {
    token = best;
  } else {
    const double inv_t = p.inv_temperature, zmax_d = static_cast<double>(zmax);
    const bool min_p_on = p.min_p_on != 0;
    const double log_min_p = p.log_min_p;
    // Candidates: not masked and, under min-p, within log(min_p) of the maximum (scaled).
    auto cand_key = [&](int64_t i) -> uint32_t {
      const float z = Z[i];
      if (z == -INFINITY) return 0u;
      if (min_p_on && __dmul_rn(static_cast<double>(z) - zmax_d, inv_t) < log_min_p) return 0u;
      return OrderKey(z);
    };
    auto weight = [&](int64_t i) -> u64 {
      const double x = __dmul_rn(static_cast<double>(Z[i]) - zmax_d, inv_t);
      return x < -31.0 ? 0ull : static_cast<u64>(__double2ull_rn(exp(x) * kFixedOne));
    };
    u64 n_cand = 0;
    for (int64_t i = tid; i < vocab; i += kThreads) n_cand += cand_key(i) != 0;
    n_cand = BlockSumU64(n_cand, sh);

    // top-k: the first k candidates in (value desc, id asc) order.
    uint32_t k_key = 0;
    long long k_id = vocab;
    const bool use_k = p.top_k > 0 && static_cast<u64>(p.top_k) < n_cand;
    if (use_k)
      RadixSelect(
          vocab, static_cast<u64>(p.top_k), cand_key, [](int64_t, uint32_t) -> u64 { return 1; },
          k_key, k_id, sh);
    auto kept_key = [&](int64_t i) -> uint32_t {
      const uint32_t key = cand_key(i);
      if (!use_k || key == 0) return key;
      return key > k_key || (key == k_key && i <= k_id) ? key : 0u;
    };
    u64 total = 0;
    for (int64_t i = tid; i < vocab; i += kThreads)
      if (kept_key(i)) total += weight(i);
    total = BlockSumU64(total, sh);

    // top-p: the shortest head (same order) whose mass reaches top_p of the candidates'.
    uint32_t p_key = 0;
    long long p_id = vocab;
    bool use_p = false;
    if (p.top_p < 1.0) {
      double target = ceil(p.top_p * static_cast<double>(total));
      target = fmin(fmax(target, 1.0), static_cast<double>(total));
      use_p = RadixSelect(
          vocab, static_cast<u64>(target), kept_key,
          [&](int64_t i, uint32_t) -> u64 { return weight(i); }, p_key, p_id, sh);
    }
    auto final_weight = [&](int64_t i) -> u64 {
      const uint32_t key = kept_key(i);
      if (key == 0) return 0;
      if (use_p && !(key > p_key || (key == p_key && i <= p_id))) return 0;
      return weight(i);
    };
    if (use_p) {
      u64 t = 0;
      for (int64_t i = tid; i < vocab; i += kThreads) t += final_weight(i);
      total = BlockSumU64(t, sh);
    }
    // The draw walks the kept tokens in ascending id.
    const double u = CounterUniform(p.seed, p.counter);
    u64 ufix = static_cast<u64>(u * static_cast<double>(total));
    if (ufix >= total) ufix = total - 1;
    token = OrderedFind(vocab, ufix, final_weight, sh);
    if (token < 0) token = best;  // unreachable: total > ufix
  }

  float logprob = 0.0f;
  const int n_top = p.logprobs > 0 ? min(p.logprobs, kMaxTopLogprobs) : 0;
  if (p.logprobs >= 0) {
    double s = 0;
    for (int64_t i = tid; i < vocab; i += kThreads)
      s += exp(static_cast<double>(L[i]) - static_cast<double>(raw_v));
    s = BlockSumF64(s, sh);
    const double lse = static_cast<double>(raw_v) + log(s);
    logprob = static_cast<float>(static_cast<double>(L[token]) - lse);
    if (n_top > 0) {
      const int n = n_top < vocab ? n_top : static_cast<int>(vocab);
      auto raw_key = [&](int64_t i) -> uint32_t { return OrderKey(L[i]); };
      uint32_t t_key = 0;
      long long t_id = vocab;
      RadixSelect(
          vocab, static_cast<u64>(n), raw_key, [](int64_t, uint32_t) -> u64 { return 1; }, t_key,
          t_id, sh);
      if (tid == 0) sh.top_count = 0;
      __syncthreads();
      for (int64_t i = tid; i < vocab; i += kThreads) {
        const uint32_t key = raw_key(i);
        if (key > t_key || (key == t_key && i <= t_id)) {
          const int slot = atomicAdd(&sh.top_count, 1);
          if (slot < kMaxTopLogprobs) {
            sh.top_ids[slot] = static_cast<int>(i);
            sh.top_vals[slot] = L[i];
          }
        }
      }
      __syncthreads();
      if (tid == 0) {
        const int m = min(sh.top_count, n);
        for (int a = 1; a < m; ++a)  // insertion sort of at most 20
          for (int b = a; b > 0 && Better(sh.top_vals[b], sh.top_ids[b], sh.top_vals[b - 1],
                                          sh.top_ids[b - 1]);
               --b) {
            const float tv = sh.top_vals[b];
            const int ti = sh.top_ids[b];
            sh.top_vals[b] = sh.top_vals[b - 1], sh.top_ids[b] = sh.top_ids[b - 1];
            sh.top_vals[b - 1] = tv, sh.top_ids[b - 1] = ti;
          }
        SampleRowResult& o = out[row];
        for (int a = 0; a < kMaxTopLogprobs; ++a) {
          o.top_ids[a] = a < m ? sh.top_ids[a] : -1;
          o.top_logprobs[a] =
              a < m ? static_cast<float>(static_cast<double>(sh.top_vals[a]) - lse) : 0.0f;
        }
      }
    }
  }
  if (tid == 0) {
    SampleRowResult& o = out[row];
    o.token = static_cast<int32_t>(token);
    o.logprob = logprob;
    if (n_top == 0)
      for (int a = 0; a < kMaxTopLogprobs; ++a) o.top_ids[a] = -1, o.top_logprobs[a] = 0.0f;
  }
}

__global__ void UniformKernel(const uint64_t* seeds, const uint64_t* counters, int64_t n,
                              double* out) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = CounterUniform(seeds[i], counters[i]);
}

}  // namespace

void SampleRows(const float* logits, int64_t rows, int64_t vocab, const SampleRowParams* params,
                const int32_t* history_tokens, const int32_t* history_output_counts,
                const int32_t* mask_tokens, const int32_t* bias_tokens, const float* bias_values,
                const uint32_t* allowed, float* work, SampleRowResult* out, cudaStream_t stream) {
  if (vocab <= 0 || vocab > kMaxSamplingVocab)
    throw std::runtime_error("SampleRows: vocabulary of " + std::to_string(vocab) +
                             " tokens is outside (0, " + std::to_string(kMaxSamplingVocab) + "]");
  if (rows <= 0) return;
  SampleKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, vocab, params, history_tokens, history_output_counts, mask_tokens, bias_tokens,
      bias_values, allowed, work, out);
  CheckLaunch("SampleRows");
}

void CounterUniforms(const uint64_t* seeds, const uint64_t* counters, int64_t n, double* out,
                     cudaStream_t stream) {
  if (n <= 0) return;
  UniformKernel<<<Blocks(n, 256), 256, 0, stream>>>(seeds, counters, n, out);
  CheckLaunch("CounterUniforms");
}

}  // namespace m3::kernels::cuda
