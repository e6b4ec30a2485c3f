// ToyRunner: batch invariant checks, a prefix-dependent "KV" value per position, media
// features from the patches, logits as a deterministic function of the last position's state.
#include "tests/runtime/toy_runner.h"

#include <cmath>
#include <string>
#include <thread>

#include "shared/error.h"

namespace m3::test {
namespace {

class ToyFeatures : public engine::EncoderOutput {
 public:
  explicit ToyFeatures(std::vector<double> v) : v_(std::move(v)) {}
  int64_t tokens() const override { return static_cast<int64_t>(v_.size()); }
  int64_t bytes() const override { return tokens() * 8; }
  double at(int64_t i) const { return v_[static_cast<size_t>(i)]; }

 private:
  std::vector<double> v_;
};

void Check(bool ok, const std::string& what) {
  Require(ok, ErrorCode::kInternal, "ToyRunner: batch invariant broken: " + what);
}

}  // namespace

ToyRunner::ToyRunner(int64_t max_model_len, int64_t msa_block) {
  info_.architecture = "toy";
  info_.dtype = "float64";
  info_.device = "cpu";
  info_.vocab_size = kVocab;
  info_.hidden_size = 1;
  info_.num_layers = 1;
  info_.max_model_len = max_model_len;
  info_.eos_token_ids = {kEos};
  info_.bos_token_id = 62;
  info_.image_token_id = kImageToken;
  info_.video_token_id = kVideoToken;
  info_.patch_dim = kPatchDim;
  info_.patch_size = 1;
  info_.temporal_patch_size = 1;
  info_.spatial_merge_size = 2;
  info_.vision_segment_max_frames = 1;
  info_.msa_block_size = msa_block;
}

std::vector<engine::MediaSegment> ToyRunner::SplitMedia(bool video,
                                                        std::array<int64_t, 3> g) const {
  Require(g[0] > 0 && g[1] > 0 && g[2] > 0 && g[1] % 2 == 0 && g[2] % 2 == 0,
          ErrorCode::kInvalidArgument, "bad grid");
  std::vector<engine::MediaSegment> out;
  const int64_t per_t = g[1] * g[2];
  const int64_t groups = video ? g[0] : 1;
  const int64_t t_each = video ? 1 : g[0];
  for (int64_t s = 0; s < groups; ++s) {
    engine::MediaSegment seg;
    seg.patch_offset = s * per_t * t_each;
    seg.patch_rows = per_t * t_each;
    seg.grid_thw = {t_each, g[1], g[2]};
    seg.tokens = seg.patch_rows / 4;
    seg.token_offset = seg.patch_offset / 4;
    out.push_back(seg);
  }
  return out;
}

std::shared_ptr<const engine::EncoderOutput> ToyRunner::Encode(const float* patches,
                                                               const engine::MediaSegment& seg) {
  // As the model runners do: non-finite pixels are the caller's error.
  for (int64_t i = 0; i < seg.patch_rows * kPatchDim; ++i)
    Require(std::isfinite(patches[i]), ErrorCode::kInvalidArgument, "non-finite pixel value");
  ++encodes;
  std::vector<double> f(static_cast<size_t>(seg.tokens));
  for (int64_t t = 0; t < seg.tokens; ++t) {
    double acc = 0;
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < kPatchDim; ++c)
        acc += patches[(t * 4 + r) * kPatchDim + c] * (1.0 + 0.1 * static_cast<double>(r * 4 + c));
    f[static_cast<size_t>(t)] = std::tanh(acc);
  }
  return std::make_shared<ToyFeatures>(std::move(f));
}

void ToyRunner::AllocateKvCache(int64_t num_pages, int64_t page_size) {
  Require(info_.msa_block_size % page_size == 0, ErrorCode::kInvalidArgument,
          "page size must divide the MSA block");
  num_pages_ = num_pages;
  page_size_ = page_size;
  kv_.assign(static_cast<size_t>(num_pages * page_size), std::nan(""));
}

void ToyRunner::Execute(const engine::ForwardBatch& b, std::vector<float>& logits) {
  if (execute_delay_us > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(execute_delay_us));
  ++steps;
  const int64_t rows = b.num_rows(), seqs = b.num_seqs();
  if (rows > max_rows_seen) max_rows_seen = rows;
  Check(rows > 0 && seqs > 0, "empty batch");
  Check(static_cast<int64_t>(b.positions.size()) == rows, "positions size");
  Check(static_cast<int64_t>(b.slot_mapping.size()) == rows, "slot_mapping size");
  Check(static_cast<int64_t>(b.context_lens.size()) == seqs, "context_lens size");
  Check(b.query_start.front() == 0 && b.query_start.back() == rows, "query_start ends");
  Check(static_cast<int64_t>(b.block_tables.size()) == seqs * b.max_pages_per_seq,
        "block table size");
  std::vector<const engine::MediaSpan*> span_of(static_cast<size_t>(rows), nullptr);
  for (const auto& m : b.media) {
    Check(m.features && m.offset >= 0 && m.offset + m.length <= m.features->tokens(),
          "media span outside its features");
    for (int64_t r = m.row; r < m.row + m.length; ++r) {
      Check(r >= 0 && r < rows && span_of[static_cast<size_t>(r)] == nullptr, "media overlap");
      Check(b.token_ids[static_cast<size_t>(r)] == kImageToken ||
                b.token_ids[static_cast<size_t>(r)] == kVideoToken,
            "media span on a text row");
      span_of[static_cast<size_t>(r)] = &m;
    }
  }
  std::vector<double> state(static_cast<size_t>(rows), 0.0);
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t q0 = b.query_start[s], q1 = b.query_start[s + 1];
    Check(q1 > q0, "empty sequence");
    if (s < b.num_decodes) Check(q1 - q0 == 1, "decode with more than one row");
    const int32_t* table = b.block_tables.data() + s * b.max_pages_per_seq;
    auto slot = [&](int64_t pos) {
      const int64_t page = pos / page_size_;
      Check(page < b.max_pages_per_seq && table[page] >= 0 && table[page] < num_pages_,
            "position " + std::to_string(pos) + " not covered by the block table");
      return static_cast<size_t>(table[page] * page_size_ + pos % page_size_);
    };
    double running = 0;
    for (int64_t p = 0; p < b.context_lens[s]; ++p) {
      const double v = kv_[slot(p)];
      Check(!std::isnan(v), "reading a position never written");
      running = running * 0.61 + v;
    }
    for (int64_t r = q0; r < q1; ++r) {
      const int64_t pos = b.context_lens[s] + (r - q0);
      Check(b.positions[static_cast<size_t>(r)] == pos, "positions");
      Check(b.slot_mapping[static_cast<size_t>(r)] == static_cast<int64_t>(slot(pos)),
            "slot mapping does not follow the block table");
      const int32_t tok = b.token_ids[static_cast<size_t>(r)];
      Check(tok >= 0 && tok < kVocab, "token id");
      double e;
      if (const engine::MediaSpan* m = span_of[static_cast<size_t>(r)]) {
        e = 3.0 * static_cast<const ToyFeatures&>(*m->features).at(m->offset + (r - m->row));
      } else {
        // A placeholder id outside every span is a generated token: embedded like any token.
        e = std::sin(tok * 1.7 + 0.3);
      }
      const double v = std::tanh(e + 0.5 * std::sin(running));
      kv_[slot(pos)] = v;
      running = running * 0.61 + v;
      state[static_cast<size_t>(r)] = running;
    }
  }
  logits.assign(b.logits_rows.size() * kVocab, 0.f);
  for (size_t i = 0; i < b.logits_rows.size(); ++i) {
    const double h = state[static_cast<size_t>(b.logits_rows[i])];
    for (int v = 0; v < kVocab; ++v)
      logits[i * kVocab + v] = static_cast<float>(4.0 * std::sin(h * 13.0 * (v + 1) + v * 0.7));
  }
}

}  // namespace m3::test
