// M3Model: input validation, vision fusion, prefill and decode on top of RunDecoder.
#include "engine/minimax_m3/m3_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/minimax_m3/m3_decoder.h"
#include "engine/minimax_m3/m3_vision.h"
#include "engine/minimax_m3/m3_weights.h"
#include "kernels/cpu/matmul.h"
#include "shared/error.h"
#include "shared/model_config.h"

namespace m3::engine::minimax_m3 {
namespace {

namespace k = m3::kernels::cpu;

class M3Model : public Model {
 public:
  M3Model(ModelConfig config, M3Weights weights)
      : config_(std::move(config)), w_(std::move(weights)) {}

  std::string architecture() const override { return "minimax_m3_vl"; }
  int64_t vocab_size() const override { return config_.text.vocab_size; }
  std::vector<int64_t> eos_token_ids() const override { return config_.eos_token_ids(); }
  int64_t max_context() const override { return config_.text.max_position_embeddings; }

  std::unique_ptr<Sequence> NewSequence() const override {
    return std::make_unique<M3Sequence>(config_.text);
  }

  PrefillResult Prefill(Sequence& base, const ModelInputs& in,
                        const CaptureOptions& capture) const override {
    M3Sequence& seq = AsM3(base);
    Require(seq.length() == 0, ErrorCode::kInternal, "Prefill on a sequence that is not empty");
    const int64_t T = static_cast<int64_t>(in.input_ids.size());
    const int64_t H = config_.text.hidden_size;
    Require(T > 0, ErrorCode::kInvalidArgument, "input_ids is empty");
    CheckContext(T, "the prompt");
    for (int64_t i = 0; i < T; ++i)
      CheckToken(in.input_ids[i], "input_ids[" + std::to_string(i) + "]");

    std::vector<float> h(T * H);
    for (int64_t i = 0; i < T; ++i)
      std::copy_n(w_.embed_tokens.data() + in.input_ids[i] * H, H, h.data() + i * H);

    PrefillResult result;
    // The reference scatters image features, then video features, each in placeholder order.
    Fuse(in.images, config_.image_token_id, "image", in.input_ids, h, capture, result.captured);
    Fuse(in.videos, config_.video_token_id, "video", in.input_ids, h, capture, result.captured);

    DecoderCapture dc{capture.hidden_states, capture.block_indices, &result.captured};
    RunDecoder(w_, config_.text, seq, h, T, dc);
    result.rows = capture.all_logits ? T : 1;
    result.logits = LmHead(h.data() + (T - result.rows) * H, result.rows);
    return result;
  }

  std::vector<float> Decode(Sequence& base, int64_t token) const override {
    M3Sequence& seq = AsM3(base);
    Require(seq.length() > 0, ErrorCode::kInternal, "Decode before Prefill");
    CheckToken(token, "token");
    CheckContext(seq.length() + 1, "the sequence");
    const int64_t H = config_.text.hidden_size;
    std::vector<float> h(w_.embed_tokens.begin() + token * H,
                         w_.embed_tokens.begin() + (token + 1) * H);
    RunDecoder(w_, config_.text, seq, h, 1, {});
    return LmHead(h.data(), 1);
  }

 private:
  static M3Sequence& AsM3(Sequence& s) {
    auto* m = dynamic_cast<M3Sequence*>(&s);
    Require(m != nullptr, ErrorCode::kInternal, "sequence was not made by this model");
    return *m;
  }

  void CheckContext(int64_t tokens, const std::string& what) const {
    const int64_t limit = config_.text.max_position_embeddings;
    Require(limit <= 0 || tokens <= limit, ErrorCode::kInvalidArgument,
            what + " would hold " + std::to_string(tokens) +
                " tokens, beyond the model's context of " + std::to_string(limit) +
                " (max_position_embeddings)");
  }

  void CheckToken(int64_t id, const std::string& what) const {
    Require(id >= 0 && id < config_.text.vocab_size, ErrorCode::kInvalidArgument,
            what + " = " + std::to_string(id) + " is outside the vocabulary [0, " +
                std::to_string(config_.text.vocab_size) + ")");
  }

  // Validates one modality's grids and patches against the placeholders, runs the vision path
  // and overwrites the placeholder rows of h.
  void Fuse(const std::optional<VisionInput>& vin, int64_t token_id, const std::string& kind,
            const std::vector<int64_t>& ids, std::vector<float>& h, const CaptureOptions& capture,
            NamedTensors& captured) const {
    const int64_t H = config_.text.hidden_size;
    const int64_t m = config_.vision.spatial_merge_size;
    std::vector<int64_t> slots;
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == token_id) slots.push_back(static_cast<int64_t>(i));
    if (!vin) {
      Require(slots.empty(), ErrorCode::kUnprocessable,
              "input_ids hold " + std::to_string(slots.size()) + " " + kind +
                  " placeholder tokens but no " + kind + " pixels were given");
      return;
    }
    Require(vin->patch_dim == config_.vision.patch_dim(), ErrorCode::kInvalidArgument,
            kind + " pixel rows have " + std::to_string(vin->patch_dim) + " values, expected " +
                std::to_string(config_.vision.patch_dim()));
    Require(!vin->grids.empty(), ErrorCode::kInvalidArgument, kind + " grid_thw is empty");
    int64_t patches = 0;
    for (size_t g = 0; g < vin->grids.size(); ++g) {
      const auto& [t, gh, gw] = vin->grids[g];
      const std::string where = kind + " grid_thw[" + std::to_string(g) + "] = (" +
                                std::to_string(t) + ", " + std::to_string(gh) + ", " +
                                std::to_string(gw) + ")";
      Require(t > 0 && gh > 0 && gw > 0, ErrorCode::kInvalidArgument, where + " must be positive");
      Require(
          gh % m == 0 && gw % m == 0, ErrorCode::kInvalidArgument,
          where + ": height and width must be divisible by the merge size " + std::to_string(m));
      Require(t <= (int64_t{1} << 20) && gh <= (int64_t{1} << 20) && gw <= (int64_t{1} << 20),
              ErrorCode::kInvalidArgument, where + " is implausibly large");
      patches += t * gh * gw;
    }
    for (size_t i = 0; i < vin->pixels.size(); ++i) {
      Require(std::isfinite(vin->pixels[i]), ErrorCode::kInvalidArgument,
              kind + " pixel_values[" + std::to_string(i / static_cast<size_t>(vin->patch_dim)) +
                  ", " + std::to_string(i % static_cast<size_t>(vin->patch_dim)) +
                  "] is not a finite number");
    }
    Require(patches == vin->rows, ErrorCode::kInvalidArgument,
            kind + " grids describe " + std::to_string(patches) + " patches but pixel_values has " +
                std::to_string(vin->rows) + " rows");
    const int64_t tokens = patches / (m * m);
    Require(static_cast<int64_t>(slots.size()) == tokens, ErrorCode::kUnprocessable,
            kind + " features and " + kind + " tokens do not match: input_ids hold " +
                std::to_string(slots.size()) + " placeholders, the grids give " +
                std::to_string(tokens) + " tokens");

    std::vector<float> tower = RunVisionTower(w_, config_, *vin);
    std::vector<float> feats = ProjectAndMerge(w_, config_, tower, patches);
    if (capture.vision) {
      captured.emplace_back(kind + ".vision_tower_out",
                            HostTensor::FromFloat({patches, config_.vision.hidden_size}, tower));
      captured.emplace_back(kind + ".projector_out", HostTensor::FromFloat({tokens, H}, feats));
    }
    for (int64_t i = 0; i < tokens; ++i)
      std::copy_n(feats.data() + i * H, H, h.data() + slots[i] * H);
  }

  std::vector<float> LmHead(const float* h, int64_t rows) const {
    const int64_t V = config_.text.vocab_size;
    std::vector<float> logits(rows * V);
    k::Linear(h, rows, config_.text.hidden_size, w_.lm_head.data(), V, nullptr, logits.data());
    return logits;
  }

  ModelConfig config_;
  M3Weights w_;
};

}  // namespace

std::unique_ptr<Model> LoadMiniMaxM3(const std::string& model_dir) {
  ModelConfig config = LoadModelConfig(model_dir);
  WeightStore store = WeightStore::OpenDirectory(model_dir);
  M3Weights weights = LoadM3Weights(store, config);
  return std::make_unique<M3Model>(std::move(config), std::move(weights));
}

}  // namespace m3::engine::minimax_m3
