// MoeGroupedExperts / MoeGroupedExpertsKMajor: a counting sort by expert builds the
// permutation and the un-permutation walks each row's picks in expert order (shared by both).
// The nn.Linear-layout version runs experts one after another with the GEMMs parallel inside
// (BLAS or ParallelFor). The K-major version runs large groups the same way on sgemm, and all
// small groups together in two parallel passes over (expert, column tile) tasks: gate and up
// tiles with SwiGLU fused, then down tiles, on SmallMGemmKMajor (no weight packing per call).
#include "kernels/cpu/moe_experts.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/small_m_gemm.h"
#include "kernels/cpu/swiglu.h"

namespace m3::kernels::cpu {
namespace {

struct Permutation {
  std::vector<int64_t> group_start;  // expert e's picks are [group_start[e], group_start[e + 1])
  std::vector<int64_t> perm;         // permuted slot -> source row
  std::vector<int64_t> pick_slot;    // pick i (row i / K, choice i % K) -> permuted slot, or -1
};

// Picks with a negative id (another rank's expert) get no slot.
Permutation Permute(const int32_t* ids, int64_t rows, int64_t K, int64_t E) {
  const int64_t picks = rows * K;
  Permutation p;
  p.group_start.assign(E + 1, 0);
  p.pick_slot.assign(picks, -1);
  for (int64_t i = 0; i < picks; ++i)
    if (ids[i] >= 0) ++p.group_start[ids[i] + 1];
  for (int64_t e = 0; e < E; ++e) p.group_start[e + 1] += p.group_start[e];
  p.perm.resize(p.group_start[E]);
  std::vector<int64_t> fill(p.group_start.begin(), p.group_start.end() - 1);
  for (int64_t i = 0; i < picks; ++i) {
    if (ids[i] < 0) continue;
    p.perm[fill[ids[i]]] = i / K;
    p.pick_slot[i] = fill[ids[i]]++;
  }
  return p;
}

std::vector<float> GatherPermuted(const float* x, const Permutation& p, int64_t H) {
  const int64_t picks = static_cast<int64_t>(p.perm.size());
  std::vector<float> xs(picks * H);
  ParallelFor(picks, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::copy_n(x + p.perm[i] * H, H, xs.data() + i * H);
  });
  return xs;
}

void Unpermute(const std::vector<float>& ys, const Permutation& p, int64_t rows, const int32_t* ids,
               const float* weights, const MoeExpertsDims& d, float* out) {
  const int64_t H = d.hidden, K = d.topk;
  ParallelFor(rows, 4, [&](int64_t b, int64_t e) {
    std::vector<int64_t> order(K);
    std::vector<float> routed(H);
    for (int64_t r = b; r < e; ++r) {
      for (int64_t j = 0; j < K; ++j) order[j] = j;
      std::sort(order.begin(), order.end(),
                [&](int64_t a, int64_t c) { return ids[r * K + a] < ids[r * K + c]; });
      std::fill(routed.begin(), routed.end(), 0.0f);
      for (int64_t j : order) {
        if (ids[r * K + j] < 0) continue;
        const float wt = weights[r * K + j];
        const float* y = ys.data() + p.pick_slot[r * K + j] * H;
        for (int64_t c = 0; c < H; ++c) routed[c] += y[c] * wt;
      }
      float* o = out + r * H;
      for (int64_t c = 0; c < H; ++c) o[c] = routed[c] * d.scale + o[c];
    }
  });
}

// Column tile of one small-group task: one AVX-512 register tile wide, and enough tasks per
// layer (experts x tiles) to keep every thread busy.
constexpr int64_t kTaskCols = 64;

struct SmallGroup {
  int64_t expert, first_slot, rows, first_act;  // first_act: its first row in the act buffer
};

// All groups of at most kSmallExpertRows rows, in two parallel passes.
void RunSmallGroups(const std::vector<SmallGroup>& groups, int64_t total_rows,
                    const std::vector<float>& xs, const float* gate_up_t, const float* down_t,
                    const MoeExpertsDims& d, std::vector<float>& ys) {
  const int64_t H = d.hidden, I = d.inter;
  const int64_t gu_tiles = (I + kTaskCols - 1) / kTaskCols,
                down_tiles = (H + kTaskCols - 1) / kTaskCols;
  std::vector<float> act(total_rows * I);
  const int64_t n_groups = static_cast<int64_t>(groups.size());
  ParallelFor(n_groups * gu_tiles, 1, [&](int64_t b, int64_t e) {
    float gate[kSmallExpertRows * kTaskCols], up[kSmallExpertRows * kTaskCols];
    for (int64_t task = b; task < e; ++task) {
      const SmallGroup& g = groups[task / gu_tiles];
      const int64_t c0 = (task % gu_tiles) * kTaskCols, w = std::min(kTaskCols, I - c0);
      const float* x = xs.data() + g.first_slot * H;
      const float* wt = gate_up_t + g.expert * H * 2 * I;
      SmallMGemmKMajor(x, g.rows, H, H, wt + c0, 2 * I, w, gate, w);
      SmallMGemmKMajor(x, g.rows, H, H, wt + I + c0, 2 * I, w, up, w);
      for (int64_t r = 0; r < g.rows; ++r)
        SwigluOai(gate + r * w, up + r * w, 1, w, w, d.alpha, d.limit,
                  act.data() + (g.first_act + r) * I + c0);
    }
  });
  ParallelFor(n_groups * down_tiles, 1, [&](int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      const SmallGroup& g = groups[task / down_tiles];
      const int64_t c0 = (task % down_tiles) * kTaskCols, w = std::min(kTaskCols, H - c0);
      SmallMGemmKMajor(act.data() + g.first_act * I, g.rows, I, I, down_t + g.expert * I * H + c0,
                       H, w, ys.data() + g.first_slot * H + c0, H);
    }
  });
}

}  // namespace

void TransposeEachExpert(const float* w, int64_t experts, int64_t rows, int64_t cols, float* out) {
  constexpr int64_t kBlock = 32;  // cache-sized blocks, so neither side strides through memory
  ParallelFor(experts * ((rows + kBlock - 1) / kBlock), 1, [&](int64_t b, int64_t e) {
    const int64_t row_blocks = (rows + kBlock - 1) / kBlock;
    for (int64_t task = b; task < e; ++task) {
      const int64_t ex = task / row_blocks, r0 = (task % row_blocks) * kBlock;
      const float* src = w + ex * rows * cols;
      float* dst = out + ex * rows * cols;
      const int64_t r1 = std::min(rows, r0 + kBlock);
      for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
        const int64_t c1 = std::min(cols, c0 + kBlock);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
      }
    }
  });
}

void MoeGroupedExperts(const float* x, int64_t rows, const int32_t* ids, const float* weights,
                       const float* gate_up, const float* down, const MoeExpertsDims& d,
                       float* out) {
  const int64_t H = d.hidden, I = d.inter, E = d.experts, K = d.topk;
  if (rows == 0) return;
  const Permutation p = Permute(ids, rows, K, E);
  const std::vector<float> xs = GatherPermuted(x, p, H);
  std::vector<float> ys(p.perm.size() * H), gu, act;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = p.group_start[e + 1] - p.group_start[e];
    if (n == 0) continue;
    const int64_t off = p.group_start[e];
    gu.resize(n * 2 * I);
    act.resize(n * I);
    Linear(xs.data() + off * H, n, H, gate_up + e * 2 * I * H, 2 * I, nullptr, gu.data());
    SwigluOai(gu.data(), gu.data() + I, n, I, 2 * I, d.alpha, d.limit, act.data());
    Linear(act.data(), n, I, down + e * H * I, H, nullptr, ys.data() + off * H);
  }
  Unpermute(ys, p, rows, ids, weights, d, out);
}

void MoeGroupedExpertsKMajor(const float* x, int64_t rows, const int32_t* ids, const float* weights,
                             const float* gate_up_t, const float* down_t, const MoeExpertsDims& d,
                             float* out) {
  const int64_t H = d.hidden, I = d.inter, E = d.experts, K = d.topk;
  if (rows == 0) return;
  const Permutation p = Permute(ids, rows, K, E);
  const std::vector<float> xs = GatherPermuted(x, p, H);
  std::vector<float> ys(p.perm.size() * H), gu, act;
  std::vector<SmallGroup> small;
  int64_t small_rows = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = p.group_start[e + 1] - p.group_start[e];
    if (n == 0) continue;
    const int64_t off = p.group_start[e];
    if (n <= kSmallExpertRows) {
      small.push_back({e, off, n, small_rows});
      small_rows += n;
      continue;
    }
    gu.resize(n * 2 * I);
    act.resize(n * I);
    LinearKMajor(xs.data() + off * H, n, H, gate_up_t + e * H * 2 * I, 2 * I, gu.data());
    SwigluOai(gu.data(), gu.data() + I, n, I, 2 * I, d.alpha, d.limit, act.data());
    LinearKMajor(act.data(), n, I, down_t + e * I * H, H, ys.data() + off * H);
  }
  if (!small.empty()) RunSmallGroups(small, small_rows, xs, gate_up_t, down_t, d, ys);
  Unpermute(ys, p, rows, ids, weights, d, out);
}

}  // namespace m3::kernels::cpu
