// MoeGroupedExperts: the counting sort runs on the host over the downloaded expert ids (one
// synchronization per MoE layer; a device-side grouped GEMM replaces it in the performance
// work), the rows are gathered on the device, the experts run as one cuBLAS GEMM pair each, and
// the un-permutation is one block per row.
#include "kernels/cuda/moe_experts.cuh"

#include <string>
#include <vector>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace m3::kernels::cuda {
namespace {

constexpr int kMaxTopk = 32;

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
      routed += ys[int64_t{pick_slot[r * K + j]} * H + c] * LoadAny(weights, wt, r * K + j);
    }
    out[r * H + c] = __float2bfloat16(routed * scale + __bfloat162float(out[r * H + c]));
  }
}

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("MoeGroupedExperts: ") + what + ": " +
                             cudaGetErrorString(e));
}

}  // namespace

void MoeGroupedExperts(cublasHandle_t handle, const bf16* x, int64_t rows, const int32_t* ids,
                       const void* weights, ElemType weights_t, const bf16* gate_up,
                       const bf16* down, const MoeExpertsDims& d, bf16* out, cudaStream_t stream) {
  const int64_t H = d.hidden, I = d.inter, E = d.experts, K = d.topk, picks = rows * K;
  if (rows <= 0) return;
  if (K > kMaxTopk) throw std::runtime_error("MoeGroupedExperts: top-k above 32");
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
