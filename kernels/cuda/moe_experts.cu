// MoeGroupedExperts, two paths with the same arithmetic (f32 accumulation, expert outputs in f32,
// the un-permutation summing in expert order, one block per row):
// - decode-sized batches (picks <= experts, so an expert rarely serves two picks): one GEMV per
//   pick through cublasGemmBatchedEx, its pointer arrays built on the device from the ids, so
//   nothing waits for the host;
// - larger batches: a counting sort on the host over the downloaded expert ids (one
//   synchronization per MoE layer), the rows gathered on the device, one cuBLAS GEMM pair per
//   expert, each expert's weights read once for all its rows.
#include "kernels/cuda/moe_experts.cuh"

#include <climits>
#include <string>
#include <vector>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kMaxTopk = 32;

// pick_slot: the row of ys holding each pick's output; null: pick p is row p.
__global__ void UnpermuteKernel(const float* ys, const int32_t* pick_slot, const int32_t* ids,
                                const void* weights, ElemType wt, int64_t K, int64_t H, float scale,
                                bf16* out) {
  const int64_t r = blockIdx.x;
  int order[kMaxTopk];
  for (int j = 0; j < K; ++j) order[j] = j;
  for (int a = 1; a < K; ++a)  // insertion sort by expert id
    for (int b = a; b > 0 && ids[r * K + order[b]] < ids[r * K + order[b - 1]]; --b) {
      const int t = order[b];
      order[b] = order[b - 1];
      order[b - 1] = t;
    }
  for (int64_t c = threadIdx.x; c < H; c += blockDim.x) {
    float routed = 0.0f;
    for (int i = 0; i < K; ++i) {
      const int j = order[i];
      const int64_t slot = pick_slot ? int64_t{pick_slot[r * K + j]} : r * K + j;
      routed += ys[slot * H + c] * LoadAny(weights, wt, r * K + j);
    }
    out[r * H + c] = __float2bfloat16(routed * scale + __bfloat162float(out[r * H + c]));
  }
}

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("MoeGroupedExperts: ") + what + ": " +
                             cudaGetErrorString(e));
}

// The per-pick operands of both batched GEMVs. Ids come from MoeRoute (always in range); one
// out of range is clamped rather than read beyond the weights.
__global__ void PickPointersKernel(const int32_t* ids, int64_t picks, int64_t K, int64_t E,
                                   int64_t H, int64_t I, const bf16* x, const bf16* gate_up,
                                   const bf16* down, bf16* gu, bf16* act, float* ys,
                                   const void** ptrs) {
  const int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (p >= picks) return;
  const int64_t e = min(max(int64_t{ids[p]}, int64_t{0}), E - 1);
  ptrs[p] = gate_up + e * 2 * I * H;       // gate_up GEMV: A
  ptrs[picks + p] = x + (p / K) * H;       //               B (the pick's token row)
  ptrs[2 * picks + p] = gu + p * 2 * I;    //               C
  ptrs[3 * picks + p] = down + e * H * I;  // down GEMV:    A
  ptrs[4 * picks + p] = act + p * I;       //               B
  ptrs[5 * picks + p] = ys + p * H;        //               C
}

// y_p = W_p b_p for every pick p (row-major W [n, k]; column-major y^T = W b^T, as Linear).
void BatchedGemv(cublasHandle_t handle, const void* const* w, const void* const* b, void* const* y,
                 int64_t n, int64_t k, cudaDataType_t yt, int64_t picks) {
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s = cublasGemmBatchedEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), 1, static_cast<int>(k), &alpha, w,
      CUDA_R_16BF, static_cast<int>(k), b, CUDA_R_16BF, static_cast<int>(k), &beta, y, yt,
      static_cast<int>(n), static_cast<int>(picks), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("MoeGroupedExperts: cublasGemmBatchedEx failed: ") +
                             cublasGetStatusString(s));
}

size_t Aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

void PerPickExperts(cublasHandle_t handle, const bf16* x, int64_t rows, const int32_t* ids,
                    const void* weights, ElemType weights_t, const bf16* gate_up, const bf16* down,
                    const MoeExpertsDims& d, bf16* out, cudaStream_t stream) {
  const int64_t H = d.hidden, I = d.inter, K = d.topk, picks = rows * K;
  // One scratch allocation: 6 pointer arrays, gu [picks, 2I], act [picks, I] (bf16), ys
  // [picks, H] (f32).
  const size_t ptr_bytes = Aligned(6 * picks * sizeof(void*));
  const size_t gu_bytes = Aligned(picks * 2 * I * 2), act_bytes = Aligned(picks * I * 2);
  char* scratch = nullptr;
  Check(cudaMallocAsync(reinterpret_cast<void**>(&scratch),
                        ptr_bytes + gu_bytes + act_bytes + picks * H * 4, stream),
        "scratch allocation");
  const void** ptrs = reinterpret_cast<const void**>(scratch);
  bf16* gu = reinterpret_cast<bf16*>(scratch + ptr_bytes);
  bf16* act = reinterpret_cast<bf16*>(scratch + ptr_bytes + gu_bytes);
  float* ys = reinterpret_cast<float*>(scratch + ptr_bytes + gu_bytes + act_bytes);
  try {
    PickPointersKernel<<<Blocks(picks, 128), 128, 0, stream>>>(ids, picks, K, d.experts, H, I, x,
                                                               gate_up, down, gu, act, ys, ptrs);
    CheckLaunch("MoeGroupedExperts pick pointers");
    BatchedGemv(handle, ptrs, ptrs + picks, const_cast<void* const*>(ptrs + 2 * picks), 2 * I, H,
                CUDA_R_16BF, picks);
    SwigluOai(gu, picks, I, d.alpha, d.limit, act, stream);
    BatchedGemv(handle, ptrs + 3 * picks, ptrs + 4 * picks,
                const_cast<void* const*>(ptrs + 5 * picks), H, I, CUDA_R_32F, picks);
    UnpermuteKernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(ys, nullptr, ids, weights,
                                                                     weights_t, K, H, d.scale, out);
    CheckLaunch("MoeGroupedExperts un-permutation");
  } catch (...) {
    cudaFreeAsync(scratch, stream);
    throw;
  }
  Check(cudaFreeAsync(scratch, stream), "scratch release");
}

}  // namespace

void MoeGroupedExperts(cublasHandle_t handle, const bf16* x, int64_t rows, const int32_t* ids,
                       const void* weights, ElemType weights_t, const bf16* gate_up,
                       const bf16* down, const MoeExpertsDims& d, bf16* out, cudaStream_t stream) {
  const int64_t H = d.hidden, I = d.inter, E = d.experts, K = d.topk, picks = rows * K;
  if (rows <= 0) return;
  if (K > kMaxTopk) throw std::runtime_error("MoeGroupedExperts: top-k above 32");
  if (picks <= E && picks <= INT_MAX) {
    PerPickExperts(handle, x, rows, ids, weights, weights_t, gate_up, down, d, out, stream);
    return;
  }
  std::vector<int32_t> host_ids(picks);
  Check(cudaMemcpyAsync(host_ids.data(), ids, picks * sizeof(int32_t), cudaMemcpyDeviceToHost,
                        stream),
        "expert ids download");
  Check(cudaStreamSynchronize(stream), "expert ids download");
  std::vector<int64_t> group_start(E + 1, 0);
  for (int32_t e : host_ids) {
    if (e < 0 || e >= E) throw std::runtime_error("MoeGroupedExperts: expert id out of range");
    ++group_start[e + 1];
  }
  for (int64_t e = 0; e < E; ++e) group_start[e + 1] += group_start[e];
  std::vector<int64_t> fill(group_start.begin(), group_start.end() - 1);
  std::vector<int32_t> index(2 * picks);  // perm (source row per slot), then pick -> slot
  for (int64_t i = 0; i < picks; ++i) {
    const int64_t slot = fill[host_ids[i]]++;
    index[slot] = static_cast<int32_t>(i / K);
    index[picks + i] = static_cast<int32_t>(slot);
  }
  // One scratch allocation: index, xs [picks, H], gu [picks, 2I], act [picks, I] (bf16), ys
  // [picks, H] (f32).
  const size_t idx_bytes = (2 * picks * sizeof(int32_t) + 255) / 256 * 256;
  const size_t xs_bytes = (picks * H * 2 + 255) / 256 * 256;
  const size_t gu_bytes = (picks * 2 * I * 2 + 255) / 256 * 256;
  const size_t act_bytes = (picks * I * 2 + 255) / 256 * 256;
  const size_t ys_bytes = picks * H * 4;
  char* scratch = nullptr;
  Check(cudaMallocAsync(reinterpret_cast<void**>(&scratch),
                        idx_bytes + xs_bytes + gu_bytes + act_bytes + ys_bytes, stream),
        "scratch allocation");
  int32_t* dev_index = reinterpret_cast<int32_t*>(scratch);
  bf16* xs = reinterpret_cast<bf16*>(scratch + idx_bytes);
  bf16* gu = reinterpret_cast<bf16*>(scratch + idx_bytes + xs_bytes);
  bf16* act = reinterpret_cast<bf16*>(scratch + idx_bytes + xs_bytes + gu_bytes);
  float* ys = reinterpret_cast<float*>(scratch + idx_bytes + xs_bytes + gu_bytes + act_bytes);
  try {
    Check(cudaMemcpyAsync(dev_index, index.data(), 2 * picks * sizeof(int32_t),
                          cudaMemcpyHostToDevice, stream),
          "permutation upload");
    // The pageable upload is staged before cudaMemcpyAsync returns, but `index` must outlive
    // the copy on every path: wait here (the step is already synchronized above).
    Check(cudaStreamSynchronize(stream), "permutation upload");
    GatherRows(x, H * 2, dev_index, picks, xs, stream);
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = group_start[e + 1] - group_start[e], off = group_start[e];
      if (n == 0) continue;
      Linear(handle, xs + off * H, n, H, gate_up + e * 2 * I * H, 2 * I, nullptr, gu + off * 2 * I,
             ElemType::kBF16, stream);
    }
    SwigluOai(gu, picks, I, d.alpha, d.limit, act, stream);
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = group_start[e + 1] - group_start[e], off = group_start[e];
      if (n == 0) continue;
      Linear(handle, act + off * I, n, I, down + e * H * I, H, nullptr, ys + off * H,
             ElemType::kF32, stream);
    }
    UnpermuteKernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(
        ys, dev_index + picks, ids, weights, weights_t, K, H, d.scale, out);
    CheckLaunch("MoeGroupedExperts un-permutation");
  } catch (...) {
    cudaFreeAsync(scratch, stream);
    throw;
  }
  Check(cudaFreeAsync(scratch, stream), "scratch release");
}

}  // namespace m3::kernels::cuda
