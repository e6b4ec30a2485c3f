// BatchSampler: logit processing and the seeded draw, one row at a time on the host.
#include "engine/step/batch_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/step/counter_rng.h"
#include "shared/error.h"

namespace m3::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Descending by value, ascending id on ties: a total order, so selection is deterministic.
struct ByValueDesc {
  const float* v;
  bool operator()(int32_t a, int32_t b) const { return v[a] > v[b] || (v[a] == v[b] && a < b); }
};

}  // namespace

BatchSampler::BatchSampler(int64_t vocab)
    : vocab_(vocab),
      work_(static_cast<size_t>(vocab)),
      counts_(static_cast<size_t>(vocab), 0),
      seen_(static_cast<size_t>(vocab), 0) {
  index_.reserve(static_cast<size_t>(vocab));
}

void BatchSampler::Sample(const float* logits, std::span<const SampleRow> rows,
                          std::vector<SampledToken>& out) {
  out.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    out[i] = SampleOne(logits + static_cast<int64_t>(i) * vocab_, rows[i]);
}

SampledToken BatchSampler::SampleOne(const float* logits, const SampleRow& row) {
  const SamplingParams& p = *row.params;
  const int64_t V = vocab_;
  float* z = work_.data();
  std::copy(logits, logits + V, z);
  for (const auto& [t, bias] : p.logit_bias)
    if (t >= 0 && t < V) z[t] += bias;

  // Penalties, touching only the tokens of the history.
  const bool rep = p.repetition_penalty != 1.0;
  const bool pen = p.presence_penalty != 0.0 || p.frequency_penalty != 0.0;
  if (rep || pen) {
    auto touch = [&](int32_t t) {
      if (t < 0 || t >= V) return false;
      if (!seen_[t]) {
        seen_[t] = 1;
        touched_.push_back(t);
      }
      return true;
    };
    for (int32_t t : row.prompt) touch(t);
    for (int32_t t : row.output)
      if (touch(t)) ++counts_[t];
    for (int32_t t : touched_) {
      float v = z[t];
      if (rep)
        v = v > 0 ? static_cast<float>(v / p.repetition_penalty)
                  : static_cast<float>(v * p.repetition_penalty);
      if (counts_[t] > 0)
        v -= static_cast<float>(p.frequency_penalty * counts_[t] + p.presence_penalty);
      z[t] = v;
    }
    for (int32_t t : touched_) seen_[t] = 0, counts_[t] = 0;
    touched_.clear();
  }
  if (static_cast<int64_t>(row.output.size()) < p.min_tokens) {
    for (int32_t t : p.stop_token_ids) z[t] = kNegInf;
    if (!p.ignore_eos)
      for (int32_t t : p.eos_token_ids) z[t] = kNegInf;
  }
  if (!row.allowed.empty()) {
    Require(static_cast<int64_t>(row.allowed.size()) * 32 >= V, ErrorCode::kInternal,
            "BatchSampler: an allowed-token mask of " + std::to_string(row.allowed.size()) +
                " words is short of the vocabulary of " + std::to_string(V));
    for (int64_t i = 0; i < V; ++i)
      if (!((row.allowed[static_cast<size_t>(i >> 5)] >> (i & 31)) & 1u)) z[i] = kNegInf;
  }

  SampledToken out;
  int32_t best = 0;
  for (int32_t i = 1; i < V; ++i)
    if (z[i] > z[best]) best = i;
  if (z[best] == kNegInf) {
    // Everything masked (a vocabulary of stop tokens only, or a grammar allowing only what
    // min_tokens forbids): fall back to the raw argmax among the allowed tokens (token 0 when
    // the mask allows none: the runtime ends such a row before sampling it).
    best = -1;
    for (int32_t i = 0; i < V; ++i) {
      if (!row.allowed.empty() && !((row.allowed[static_cast<size_t>(i >> 5)] >> (i & 31)) & 1u))
        continue;
      if (best < 0 || logits[i] > logits[best]) best = i;
    }
    out.token = best < 0 ? 0 : best;
  } else if (p.greedy()) {
    out.token = best;
  } else {
    const double inv_t = 1.0 / p.temperature;
    const float zmax = z[best];
    index_.clear();
    // min-p and -inf masks are thresholds on the scaled logit relative to the maximum.
    const double floor_scaled =
        p.min_p > 0 ? std::log(p.min_p) : -std::numeric_limits<double>::infinity();
    for (int32_t i = 0; i < V; ++i) {
      if (z[i] == kNegInf) continue;
      if ((static_cast<double>(z[i]) - zmax) * inv_t < floor_scaled) continue;
      index_.push_back(i);
    }
    ByValueDesc cmp{z};
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < index_.size()) {
      std::nth_element(index_.begin(), index_.begin() + p.top_k, index_.end(), cmp);
      index_.resize(static_cast<size_t>(p.top_k));
    }
    auto weight = [&](int32_t i) { return std::exp((static_cast<double>(z[i]) - zmax) * inv_t); };
    double total = 0;
    for (int32_t i : index_) total += weight(i);
    size_t keep = index_.size();
    if (p.top_p < 1.0) {
      // Sort a growing head of the candidates until it holds top_p of the mass.
      const double target = p.top_p * total;
      size_t head = std::min<size_t>(64, index_.size());
      for (;;) {
        std::partial_sort(index_.begin(), index_.begin() + head, index_.end(), cmp);
        double acc = 0;
        size_t n = 0;
        while (n < head && acc < target) acc += weight(index_[n++]);
        if (acc >= target || head == index_.size()) {
          keep = std::max<size_t>(n, 1);
          break;
        }
        head = std::min(index_.size(), head * 4);
      }
      total = 0;
      for (size_t n = 0; n < keep; ++n) total += weight(index_[n]);
    }
    // The draw walks the kept tokens in ascending id whatever selected them, an order the
    // device sampler (kernels/cuda/sampling.cuh) reproduces without sorting.
    if (p.top_k > 0 || p.top_p < 1.0)
      std::sort(index_.begin(), index_.begin() + static_cast<std::ptrdiff_t>(keep));
    const double u = CounterUniform(p.seed, row.output.size()) * total;
    double acc = 0;
    out.token = index_[keep - 1];
    for (size_t n = 0; n < keep; ++n) {
      acc += weight(index_[n]);
      if (u < acc) {
        out.token = index_[n];
        break;
      }
    }
  }

  if (p.return_logprobs) {
    float m = logits[0];
    for (int64_t i = 1; i < V; ++i) m = std::max(m, logits[i]);
    double s = 0;
    for (int64_t i = 0; i < V; ++i) s += std::exp(static_cast<double>(logits[i]) - m);
    const double lse = m + std::log(s);
    out.logprob = static_cast<float>(logits[out.token] - lse);
    if (p.logprobs > 0) {
      const size_t n = std::min<size_t>(static_cast<size_t>(p.logprobs), static_cast<size_t>(V));
      index_.resize(static_cast<size_t>(V));
      for (int32_t i = 0; i < V; ++i) index_[i] = i;
      ByValueDesc raw{logits};
      std::partial_sort(index_.begin(), index_.begin() + n, index_.end(), raw);
      for (size_t k = 0; k < n; ++k)
        out.top.emplace_back(index_[k], static_cast<float>(logits[index_[k]] - lse));
    }
  }
  return out;
}

}  // namespace m3::engine
