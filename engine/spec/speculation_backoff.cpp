// SpeculationBackoff: the yield / cost model over k.
#include "engine/spec/speculation_backoff.h"

#include <algorithm>
#include <cmath>

namespace m3::engine::spec {

SpeculationBackoff::SpeculationBackoff(int64_t max_k, int64_t free_rows, double prior)
    : max_k_(max_k), free_rows_(free_rows), prior_(prior), acceptance_(prior) {}

int64_t SpeculationBackoff::DraftsFor(int64_t decodes) const {
  const double a = std::clamp(acceptance_, 0.0, 0.999);
  const double b = static_cast<double>(std::max<int64_t>(decodes, 1));
  // A verify row costs a little even where the step is bound by reads (sampling, the LM head
  // row, the attention over one more query): 2% of a step per draft keeps k = 0 preferred when
  // nothing is ever accepted.
  auto cost = [&](int64_t k) {
    const double rows = b * static_cast<double>(k + 1);
    const double bound = free_rows_ > 0 ? std::max(1.0, rows / static_cast<double>(free_rows_)) : 1;
    return bound * (1.0 + 0.02 * static_cast<double>(k));
  };
  int64_t best = 0;
  double best_rate = 1.0 / cost(0);
  for (int64_t k = 1; k <= max_k_; ++k) {
    const double tokens = (1.0 - std::pow(a, static_cast<double>(k + 1))) / (1.0 - a);
    const double rate = tokens / cost(k);
    if (rate > best_rate * 1.0001) best = k, best_rate = rate;
  }
  return best;
}

void SpeculationBackoff::Record(int64_t proposed, int64_t accepted) {
  constexpr double kWeight = 0.1;  // about the last ten steps
  if (proposed <= 0) {
    acceptance_ += 0.01 * (prior_ - acceptance_);
    return;
  }
  const double rate = static_cast<double>(accepted) / static_cast<double>(proposed);
  acceptance_ += kWeight * (rate - acceptance_);
}

}  // namespace m3::engine::spec
