// Eagle3Proposer: drafts from an EAGLE-3 draft model (eagle3_draft_model.h), as vLLM's EAGLE
// proposer runs one. After each target step the draft catches up over the rows the target kept:
// at position p it reads token p + 1 and fc(the target's hidden states at p from the three aux
// layers), writing its own KV; its last row yields the first draft. Each further draft feeds
// the previous one back with the draft's own pre-norm output as the hidden state. Drafts are
// the argmax of the draft (point masses: draft_acceptance.h's exact rule applies).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "engine/spec/draft_proposer.h"
#include "engine/spec/eagle3_draft_model.h"

namespace m3::engine::spec {

class Eagle3Proposer : public DraftProposer {
 public:
  explicit Eagle3Proposer(std::shared_ptr<const Eagle3DraftModel> model);
  std::string name() const override { return "eagle3"; }
  std::vector<int64_t> target_layers() const override { return model_->config().aux_layers; }
  void Observe(std::span<const ObservedRows> rows) override;
  void Retain(std::span<const std::string_view> live) override;
  void Propose(std::span<const DraftRequest> requests,
               std::vector<std::vector<int32_t>>& drafts) override;

 private:
  struct State {
    DraftKv kv;
    int64_t last_position = -1;  // the last position caught up to
    std::vector<float> prenorm;  // its pre-norm output
    int32_t next = -1;           // its draft: the token after position last_position + 1
  };
  std::shared_ptr<const Eagle3DraftModel> model_;
  std::unordered_map<std::string, State> states_;
};

// The draft of `config_dir` for a target of `target_layers` layers, `target_hidden` wide, with
// `target_vocab` tokens; the target's embeddings are read from target_dir when the draft has
// none of its own.
std::shared_ptr<const Eagle3DraftModel> LoadEagle3Draft(const std::string& dir,
                                                        const std::string& target_dir,
                                                        int64_t target_layers,
                                                        int64_t target_hidden,
                                                        int64_t target_vocab);

}  // namespace m3::engine::spec
