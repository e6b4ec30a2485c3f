// Exact acceptance of draft tokens (speculative decoding), greedy and sampled alike.
//
// A sequence verified with k drafts d[0..k) gets k + 1 rows of target logits: row j follows
// the last token and d[0..j). The target's own pick at row j is drawn by the sampler exactly
// as a plain decode step would draw that token: the same logit processing (penalties see the
// history extended by d[0..j), temperature, top-k / top-p / min-p, min_tokens masks) and the
// same uniform, CounterUniform(seed, output length + j). Draft j is accepted when the pick
// equals it; the first pick that differs (or the pick after the last draft, the bonus token)
// ends the step.
//
// That is Leviathan et al.'s rejection sampling for a draft distribution that is a point mass
// (every proposer here drafts deterministically: n-gram lookup, argmax of a draft model):
// accept d with probability min(1, p(d) / q(d)) = p(d); on rejection, draw from the residual
// max(0, p - q) normalized, which is p without d, renormalized. Drawing one token from p by
// inverse CDF and accepting iff it is d realizes both at once (P[accept] = p(d), and a rejected
// draw is distributed as p conditioned on != d), so every emitted token is distributed as the
// target's, and a seeded request emits token for token what it would without speculation.
// Greedy (argmax picks) is the special case: the longest prefix where drafts equal the argmax,
// plus the argmax after it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/step/batch_sampler.h"

namespace m3::engine::spec {

// The sampler rows of one verified sequence: row j's history is output + drafts[0..j), so its
// penalties and its draw counter are the ones the plain path would use for that token.
// `history` receives output + drafts and must outlive `rows`' use (the spans point into it).
void AppendVerifyRows(const SamplingParams& params, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, std::span<const int32_t> drafts,
                      std::vector<int32_t>& history, std::vector<SampleRow>& rows);

// How many leading drafts the target's picks (k + 1 rows, as AppendVerifyRows laid them out)
// accept; the emitted tokens are drafts[0..a) followed by picks[a].token.
//
// forced_acceptance in [0, 1] is a measuring hook that breaks exactness: draft j is accepted
// with that probability whatever the target picked (a seeded Bernoulli draw from `seed` and
// `counter` + j), for timing the machinery on weights whose drafts never match. < 0: off.
int64_t AcceptedDrafts(std::span<const int32_t> drafts, std::span<const SampledToken> picks,
                       double forced_acceptance = -1, uint64_t seed = 0, uint64_t counter = 0);

// Host reference of one verified sequence: samples the k + 1 rows of `logits` ([k + 1, vocab])
// with `sampler` and returns the emitted tokens (1 to k + 1).
std::vector<int32_t> SpeculativeSample(BatchSampler& sampler, const float* logits,
                                       const SamplingParams& params,
                                       std::span<const int32_t> prompt,
                                       std::span<const int32_t> output,
                                       std::span<const int32_t> drafts);

}  // namespace m3::engine::spec
