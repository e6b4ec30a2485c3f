// Sampler: softmax over temperature-scaled logits restricted to the top-k, then the smallest
// prefix (by probability) whose mass reaches top_p, then an inverse-CDF draw.
#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace m3::kernels::cpu {

int64_t ArgMax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), state_(params.seed) {}

double Sampler::NextUniform() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

int64_t Sampler::Sample(const float* logits, int64_t vocab) {
  if (params_.temperature <= 0.0f) return ArgMax(logits, vocab);
  std::vector<int64_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  int64_t keep = vocab;
  if (params_.top_k > 0) keep = std::min(keep, params_.top_k);
  std::vector<double> prob(keep);
  double max_logit = double(logits[order[0]]) / params_.temperature, sum = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    prob[i] = std::exp(double(logits[order[i]]) / params_.temperature - max_logit);
    sum += prob[i];
  }
  for (double& p : prob) p /= sum;
  if (params_.top_p < 1.0f) {
    double mass = 0.0;
    int64_t n = 0;
    while (n < keep) {
      mass += prob[n++];
      if (mass >= params_.top_p) break;
    }
    keep = std::max<int64_t>(1, n);
    double kept = std::accumulate(prob.begin(), prob.begin() + keep, 0.0);
    for (int64_t i = 0; i < keep; ++i) prob[i] /= kept;
  }
  double u = NextUniform(), acc = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += prob[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

}  // namespace m3::kernels::cpu
