// Eagle3Proposer: the catch-up after each target step and the draft chain.
#include "engine/spec/eagle3_proposer.h"

#include <algorithm>
#include <filesystem>
#include <unordered_set>

#include "shared/error.h"
#include "shared/safetensors.h"

namespace m3::engine::spec {

Eagle3Proposer::Eagle3Proposer(std::shared_ptr<const Eagle3DraftModel> model)
    : model_(std::move(model)) {}

void Eagle3Proposer::Observe(std::span<const ObservedRows> rows) {
  const Eagle3Config& c = model_->config();
  const int64_t Ht = c.target_hidden_size, H = c.hidden_size;
  std::vector<float> aux, fused;
  std::vector<int32_t> ids, next;
  std::vector<int64_t> positions;
  for (const ObservedRows& o : rows) {
    if (o.rows <= 0) continue;
    Require(o.hidden.size() == 3, ErrorCode::kInternal, "EAGLE-3: three target hidden states");
    Require(static_cast<int64_t>(o.tokens.size()) > o.first_position + o.rows, ErrorCode::kInternal,
            "EAGLE-3: catch-up rows without their next token");
    State& st = states_[std::string(o.id)];
    st.kv.Truncate(o.first_position);
    aux.resize(static_cast<size_t>(o.rows * 3 * Ht));
    for (int64_t r = 0; r < o.rows; ++r)
      for (int64_t l = 0; l < 3; ++l)
        std::copy(o.hidden[static_cast<size_t>(l)] + r * Ht,
                  o.hidden[static_cast<size_t>(l)] + (r + 1) * Ht, aux.begin() + (r * 3 + l) * Ht);
    fused.resize(static_cast<size_t>(o.rows * H));
    model_->Fuse(aux.data(), o.rows, fused.data());
    ids.clear();
    positions.clear();
    for (int64_t r = 0; r < o.rows; ++r) {
      positions.push_back(o.first_position + r);
      ids.push_back(o.tokens[static_cast<size_t>(o.first_position + r + 1)]);
    }
    std::vector<float> prenorm;
    model_->Forward(st.kv, ids, positions, fused.data(), prenorm, next);
    st.last_position = o.first_position + o.rows - 1;
    st.prenorm.assign(prenorm.end() - H, prenorm.end());
    st.next = next.back();
  }
}

void Eagle3Proposer::Retain(std::span<const std::string_view> live) {
  std::unordered_set<std::string_view> keep(live.begin(), live.end());
  for (auto it = states_.begin(); it != states_.end();)
    it = keep.count(it->first) ? std::next(it) : states_.erase(it);
}

void Eagle3Proposer::Propose(std::span<const DraftRequest> requests,
                             std::vector<std::vector<int32_t>>& drafts) {
  drafts.resize(requests.size());
  std::vector<float> prenorm, hidden;
  std::vector<int32_t> next;
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& rq = requests[i];
    std::vector<int32_t>& d = drafts[i];
    d.clear();
    auto it = states_.find(std::string(rq.id));
    // Caught up to the position before the last token: the draft follows that token.
    if (it == states_.end() || rq.max_drafts <= 0 ||
        it->second.last_position != static_cast<int64_t>(rq.tokens.size()) - 2)
      continue;
    State& st = it->second;
    d.push_back(st.next);
    hidden = st.prenorm;
    for (int64_t j = 1; j < rq.max_drafts; ++j) {
      const int32_t id = d.back();
      const int64_t pos = st.last_position + j;
      model_->Forward(st.kv, std::span<const int32_t>(&id, 1), std::span<const int64_t>(&pos, 1),
                      hidden.data(), prenorm, next);
      hidden = prenorm;
      d.push_back(next[0]);
    }
  }
}

std::shared_ptr<const Eagle3DraftModel> LoadEagle3Draft(const std::string& dir,
                                                        const std::string& target_dir,
                                                        int64_t target_layers,
                                                        int64_t target_hidden,
                                                        int64_t target_vocab) {
  Eagle3Config c = LoadEagle3Config(dir, target_layers, target_hidden, target_vocab);
  std::vector<float> embedding;
  const SafetensorsFile draft =
      SafetensorsFile::Open((std::filesystem::path(dir) / "model.safetensors").string());
  const bool own = draft.Has("embed_tokens.weight") || draft.Has("model.embed_tokens.weight");
  if (!own) {
    Require(!target_dir.empty(), ErrorCode::kInvalidArgument,
            dir +
                ": the EAGLE-3 draft shares the target's embeddings, but no target directory "
                "was given");
    const WeightStore target = WeightStore::OpenDirectory(target_dir);
    for (const std::string& n : target.Names()) {
      if (n.size() < 19 || n.compare(n.size() - 19, 19, "embed_tokens.weight") != 0) continue;
      if (n.find("vision") != std::string::npos) continue;
      const TensorView t = target.Get(n);
      if (t.shape == std::vector<int64_t>{target_vocab, target_hidden}) {
        embedding = ToFloat32(t, n);
        break;
      }
    }
    Require(!embedding.empty(), ErrorCode::kNotFound,
            target_dir + ": no [vocab, hidden] embed_tokens.weight for the EAGLE-3 draft to share");
  }
  return std::make_shared<const Eagle3DraftModel>(dir, std::move(c), std::move(embedding));
}

}  // namespace m3::engine::spec
