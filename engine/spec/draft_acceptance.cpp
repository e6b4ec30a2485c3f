// Draft acceptance: the verify rows' histories and the accepted prefix.
#include "engine/spec/draft_acceptance.h"

#include "engine/step/counter_rng.h"
#include "shared/error.h"

namespace m3::engine::spec {
namespace {

// The forced-acceptance hook's stream, apart from the sampler's draws of the same seed.
constexpr uint64_t kForcedAcceptanceTag = 0x5350454341434350ULL;

}  // namespace

void AppendVerifyRows(const SamplingParams& params, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, std::span<const int32_t> drafts,
                      std::vector<int32_t>& history, std::vector<SampleRow>& rows) {
  history.assign(output.begin(), output.end());
  history.insert(history.end(), drafts.begin(), drafts.end());
  for (size_t j = 0; j <= drafts.size(); ++j)
    rows.push_back({&params, prompt, std::span<const int32_t>(history.data(), output.size() + j)});
}

int64_t AcceptedDrafts(std::span<const int32_t> drafts, std::span<const SampledToken> picks,
                       double forced_acceptance, uint64_t seed, uint64_t counter) {
  Require(picks.size() == drafts.size() + 1, ErrorCode::kInternal,
          "draft acceptance needs one pick per draft plus the bonus row");
  int64_t a = 0;
  for (; a < static_cast<int64_t>(drafts.size()); ++a) {
    const bool accept = forced_acceptance >= 0
                            ? CounterUniform(seed ^ kForcedAcceptanceTag,
                                             counter + static_cast<uint64_t>(a)) < forced_acceptance
                            : picks[static_cast<size_t>(a)].token == drafts[static_cast<size_t>(a)];
    if (!accept) break;
  }
  return a;
}

std::vector<int32_t> SpeculativeSample(BatchSampler& sampler, const float* logits,
                                       const SamplingParams& params,
                                       std::span<const int32_t> prompt,
                                       std::span<const int32_t> output,
                                       std::span<const int32_t> drafts) {
  std::vector<int32_t> history;
  std::vector<SampleRow> rows;
  AppendVerifyRows(params, prompt, output, drafts, history, rows);
  std::vector<SampledToken> picks;
  sampler.Sample(logits, rows, picks);
  const int64_t a = AcceptedDrafts(drafts, picks);
  std::vector<int32_t> emitted(drafts.begin(), drafts.begin() + a);
  emitted.push_back(picks[static_cast<size_t>(a)].token);
  return emitted;
}

}  // namespace m3::engine::spec
