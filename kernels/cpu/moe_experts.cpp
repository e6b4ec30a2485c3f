// MoeGroupedExperts: a counting sort by expert builds the permutation; experts run one after
// another with the GEMMs parallel inside (BLAS or ParallelFor); the un-permutation walks each
// row's picks in expert order.
#include "kernels/cpu/moe_experts.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/swiglu.h"

namespace m3::kernels::cpu {

void MoeGroupedExperts(const float* x, int64_t rows, const int32_t* ids, const float* weights,
                       const float* gate_up, const float* down, const MoeExpertsDims& d,
                       float* out) {
  const int64_t H = d.hidden, I = d.inter, E = d.experts, K = d.topk, picks = rows * K;
  if (rows == 0) return;
  // Permutation: group_start[e] .. group_start[e + 1] are expert e's picks, in row order.
  std::vector<int64_t> group_start(E + 1, 0), perm(picks);
  for (int64_t i = 0; i < picks; ++i) ++group_start[ids[i] + 1];
  for (int64_t e = 0; e < E; ++e) group_start[e + 1] += group_start[e];
  std::vector<int64_t> fill(group_start.begin(), group_start.end() - 1);
  std::vector<int64_t> pick_slot(picks);  // where pick i's output lands in the permuted buffer
  for (int64_t i = 0; i < picks; ++i) {
    perm[fill[ids[i]]] = i / K;
    pick_slot[i] = fill[ids[i]]++;
  }
  std::vector<float> xs(picks * H), ys(picks * H), gu, act;
  ParallelFor(picks, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::copy_n(x + perm[i] * H, H, xs.data() + i * H);
  });
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = group_start[e + 1] - group_start[e];
    if (n == 0) continue;
    const int64_t off = group_start[e];
    gu.resize(n * 2 * I);
    act.resize(n * I);
    Linear(xs.data() + off * H, n, H, gate_up + e * 2 * I * H, 2 * I, nullptr, gu.data());
    SwigluOai(gu.data(), gu.data() + I, n, I, 2 * I, d.alpha, d.limit, act.data());
    Linear(act.data(), n, I, down + e * H * I, H, nullptr, ys.data() + off * H);
  }
  ParallelFor(rows, 4, [&](int64_t b, int64_t e) {
    std::vector<int64_t> order(K);
    std::vector<float> routed(H);
    for (int64_t r = b; r < e; ++r) {
      for (int64_t j = 0; j < K; ++j) order[j] = j;
      std::sort(order.begin(), order.end(),
                [&](int64_t a, int64_t c) { return ids[r * K + a] < ids[r * K + c]; });
      std::fill(routed.begin(), routed.end(), 0.0f);
      for (int64_t j : order) {
        const float wt = weights[r * K + j];
        const float* y = ys.data() + pick_slot[r * K + j] * H;
        for (int64_t c = 0; c < H; ++c) routed[c] += y[c] * wt;
      }
      float* o = out + r * H;
      for (int64_t c = 0; c < H; ++c) o[c] = routed[c] * d.scale + o[c];
    }
  });
}

}  // namespace m3::kernels::cpu
