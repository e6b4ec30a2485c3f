// MoeRouteSigmoid: per token, a partial sort of the biased scores.
#include "kernels/cpu/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace m3::kernels::cpu {
namespace {

// The rank-local id of global expert e (-1 where another rank holds it).
int64_t LocalExpert(int64_t e, int64_t local_first, int64_t local_count) {
  if (local_count < 0) return e;
  return e >= local_first && e < local_first + local_count ? e - local_first : -1;
}

}  // namespace

void MoeRouteSigmoid(const float* logits, int64_t tokens, int64_t experts, const float* bias,
                     int64_t topk, int64_t* ids, float* weights, int64_t local_first,
                     int64_t local_count) {
  std::vector<float> s(experts), choice(experts);
  std::vector<int64_t> order(experts);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e) {
      s[e] = 1.0f / (1.0f + std::exp(-logits[t * experts + e]));
      choice[e] = s[e] + (bias ? bias[e] : 0.0f);
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + topk, order.end(), [&](int64_t a, int64_t b) {
      if (choice[a] != choice[b]) return choice[a] > choice[b];
      return a < b;
    });
    float sum = 0.0f;
    for (int64_t j = 0; j < topk; ++j) sum += s[order[j]];
    for (int64_t j = 0; j < topk; ++j) {
      ids[t * topk + j] = LocalExpert(order[j], local_first, local_count);
      weights[t * topk + j] = s[order[j]] / sum;
    }
  }
}

}  // namespace m3::kernels::cpu
