// SpeculativeDecoder: proposals before the step, verify rows and acceptance after it.
#include "engine/runtime/speculative_decoder.h"

#include <algorithm>

#include "engine/spec/draft_acceptance.h"
#include "shared/error.h"

namespace m3::engine {

SpeculativeDecoder::SpeculativeDecoder(const spec::SpeculativeConfig& config,
                                       std::unique_ptr<spec::DraftProposer> proposer,
                                       int64_t free_rows, int64_t max_model_len)
    : config_(config),
      proposer_(std::move(proposer)),
      backoff_(config.num_speculative_tokens, free_rows),
      max_model_len_(max_model_len) {
  Require(proposer_ != nullptr, ErrorCode::kInternal, "speculative decoding without a proposer");
  layers_ = proposer_->target_layers();
}

CaptureRequest SpeculativeDecoder::capture() {
  CaptureRequest c;
  if (layers_.empty()) return c;
  c.hidden_states = true;
  c.hidden_state_layers = layers_;
  c.out = &captured_;
  return c;
}

void SpeculativeDecoder::Observe(const ScheduledStep& step) {
  if (layers_.empty()) return;
  std::vector<const float*> layer_rows;
  int64_t width = 0;
  for (int64_t l : layers_) {
    const std::string name = "hidden_states." + std::to_string(l);
    auto it = std::find_if(captured_.begin(), captured_.end(),
                           [&](const auto& t) { return t.first == name; });
    Require(it != captured_.end() && it->second.shape().size() == 2 &&
                it->second.shape()[0] == step.batch.num_rows(),
            ErrorCode::kInternal, "speculative decoding: the runner captured no " + name);
    width = it->second.shape()[1];
    layer_rows.push_back(it->second.template as<float>().data());
  }
  std::vector<spec::ObservedRows> rows;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const Sequence* s = step.seqs[i];
    spec::ObservedRows o;
    o.id = s->id();
    o.tokens = s->tokens();
    o.first_position = step.batch.context_lens[i];
    // Rows whose next token is known (all the kept ones: a chunk either ends before the last
    // prompt token or its step sampled the token after it).
    o.rows = std::min<int64_t>(step.rows[i],
                               static_cast<int64_t>(s->tokens().size()) - 1 - o.first_position);
    for (const float* base : layer_rows)
      o.hidden.push_back(base + static_cast<int64_t>(step.batch.query_start[i]) * width);
    rows.push_back(std::move(o));
  }
  proposer_->Observe(rows);
  captured_.clear();
}

void SpeculativeDecoder::Propose(std::span<Sequence* const> running) {
  requests_.clear();
  proposing_.clear();
  captured_.clear();  // a failed step's
  std::vector<std::string_view> live;
  for (const Sequence* s : running) live.push_back(s->id());
  proposer_->Retain(live);
  int64_t decodes = 0;
  for (Sequence* s : running) {
    s->drafts.clear();
    const int64_t known = static_cast<int64_t>(s->tokens().size());
    if (s->num_generated() > 0 && known - s->num_computed == 1) ++decodes;
  }
  const int64_t k = config_.backoff && config_.forced_acceptance < 0
                        ? backoff_.DraftsFor(decodes)
                        : config_.num_speculative_tokens;
  if (k <= 0) {
    backoff_.Record(0, 0);
    return;
  }
  for (Sequence* s : running) {
    const int64_t known = static_cast<int64_t>(s->tokens().size());
    if (s->num_generated() == 0 || known - s->num_computed != 1) continue;
    // A structured output's mask depends on each drawn token: one row per step.
    if (s->grammar) continue;
    // Drafts past the request's last token or the context are never used.
    const int64_t room =
        std::min(s->sampling().max_tokens - s->num_generated() - 1, max_model_len_ - known);
    const int64_t n = std::min(k, room);
    if (n <= 0) continue;
    requests_.push_back({s->id(), s->tokens(), s->prompt_len(), n});
    proposing_.push_back(s);
  }
  if (requests_.empty()) return;
  proposer_->Propose(requests_, drafts_);
  // The measuring hook verifies k drafts every step, and uniform drafts keep every sequence of a
  // decode step at 1 + k rows (a step the GPU replays as a recorded graph): what the proposer
  // found, then fillers (the last token or draft repeated), verified and rejected as any draft.
  const bool pad = config_.forced_acceptance >= 0 || config_.uniform_drafts;
  for (size_t i = 0; i < proposing_.size(); ++i) {
    std::vector<int32_t>& d = drafts_[i];
    while (pad && static_cast<int64_t>(d.size()) < requests_[i].max_drafts)
      d.push_back(d.empty() ? requests_[i].tokens.back() : d.back());
    proposing_[i]->drafts = std::move(d);
  }
}

void SpeculativeDecoder::SampleRows(const ScheduledStep& step, std::vector<SampleRow>& rows) {
  rows.clear();
  histories_.resize(step.sampled.size());
  first_rows_.clear();
  for (size_t i = 0; i < step.sampled.size(); ++i) {
    const Sequence* s = step.sampled[i];
    first_rows_.push_back(rows.size());
    if (s->drafts.empty()) {
      rows.push_back({&s->sampling(), s->prompt(), s->output()});
    } else {
      spec::AppendVerifyRows(s->sampling(), s->prompt(), s->output(), s->drafts, histories_[i],
                             rows);
    }
  }
}

void SpeculativeDecoder::Accept(const ScheduledStep& step, std::span<const SampledToken> picks,
                                std::vector<std::vector<SampledToken>>& emitted) {
  emitted.resize(step.sampled.size());
  size_t row = 0;
  int64_t proposed = 0, accepted = 0;
  for (size_t i = 0; i < step.sampled.size(); ++i) {
    const Sequence* s = step.sampled[i];
    const std::vector<int32_t>& d = s->drafts;
    Require(row + d.size() < picks.size(), ErrorCode::kInternal,
            "speculative decoding: fewer picks than verify rows");
    const int64_t a =
        spec::AcceptedDrafts(d, picks.subspan(row, d.size() + 1), config_.forced_acceptance,
                             s->sampling().seed, static_cast<uint64_t>(s->num_generated()));
    emitted[i].clear();
    for (int64_t j = 0; j <= a; ++j) emitted[i].push_back(picks[row + static_cast<size_t>(j)]);
    // Forced acceptance keeps the draft where the target picked otherwise.
    for (int64_t j = 0; j < a; ++j)
      emitted[i][static_cast<size_t>(j)].token = d[static_cast<size_t>(j)];
    if (!d.empty()) {
      proposed += static_cast<int64_t>(d.size());
      accepted += a;
      ++stats_.steps;
    }
    row += d.size() + 1;
  }
  stats_.proposed += proposed;
  stats_.accepted += accepted;
  backoff_.Record(proposed, accepted);
}

}  // namespace m3::engine
