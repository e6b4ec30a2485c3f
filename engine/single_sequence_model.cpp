// SingleSequenceModel: input validation, media encoding and placeholder mapping, prefill chunks
// and decode steps as ForwardBatches, capture concatenation.
#include "engine/single_sequence_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>

#include "shared/error.h"

namespace m3::engine {
namespace {

std::string Str(int64_t v) {
  return std::to_string(v);
}

// The runner plus the page free list, shared with the sequences so pages return on destruction.
struct State {
  std::unique_ptr<ModelRunner> runner;
  std::mutex mu;
  std::vector<int32_t> free_pages;
  int64_t page_size = 0;
};

class DriverSequence : public ModelSequence {
 public:
  explicit DriverSequence(std::shared_ptr<State> state) : state_(std::move(state)) {}
  ~DriverSequence() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->free_pages.insert(state_->free_pages.end(), pages.rbegin(), pages.rend());
  }
  int64_t length() const override { return length_; }

  // Makes the pages cover positions [0, tokens); caller holds the state lock.
  void Reserve(int64_t tokens) {
    const int64_t need = (tokens + state_->page_size - 1) / state_->page_size;
    while (static_cast<int64_t>(pages.size()) < need) {
      Require(!state_->free_pages.empty(), ErrorCode::kResourceExhausted,
              "the KV page pool (" + Str(state_->runner->num_pages()) + " pages of " +
                  Str(state_->page_size) + " tokens) is exhausted");
      pages.push_back(state_->free_pages.back());
      state_->free_pages.pop_back();
    }
  }

  std::vector<int32_t> pages;
  int64_t length_ = 0;

 private:
  std::shared_ptr<State> state_;
};

// Appends b's rows to a along dimension `dim` (shapes equal elsewhere).
void Concat(HostTensor& a, const HostTensor& b, size_t dim) {
  if (a.shape().empty()) {
    a = b;
    return;
  }
  Shape s = a.shape();
  const int64_t outer = NumElements(Shape(s.begin(), s.begin() + dim));
  const size_t es = DTypeSize(a.dtype());
  const int64_t ia = NumElements(Shape(s.begin() + dim, s.end())) * es;
  const int64_t ib = NumElements(Shape(b.shape().begin() + dim, b.shape().end())) * es;
  s[dim] += b.shape()[dim];
  HostTensor c = HostTensor::Uninitialized(a.dtype(), s);
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(c.data() + o * (ia + ib), a.data() + o * ia, ia);
    std::memcpy(c.data() + o * (ia + ib) + ia, b.data() + o * ib, ib);
  }
  a = std::move(c);
}

void Merge(NamedTensors& into, NamedTensors& part, const std::string& prefix, size_t dim) {
  for (auto& [name, t] : part) {
    const std::string full = prefix + name;
    auto it =
        std::find_if(into.begin(), into.end(), [&](const auto& e) { return e.first == full; });
    if (it == into.end())
      into.emplace_back(full, std::move(t));
    else
      Concat(it->second, t, name.rfind("block_indices", 0) == 0 ? 1 : dim);
  }
}

// Where one placeholder row's features come from.
struct FeatureRef {
  std::shared_ptr<const EncoderOutput> features;
  int64_t offset = 0;
};

class SingleSequenceModel : public Model {
 public:
  SingleSequenceModel(std::unique_ptr<ModelRunner> runner, const SingleSequenceOptions& o)
      : state_(std::make_shared<State>()), options_(o) {
    const RunnerInfo& info = runner->info();
    int64_t ps =
        o.page_size > 0 ? o.page_size : (info.msa_block_size > 0 ? info.msa_block_size : 16);
    const int64_t context = info.max_model_len > 0 ? info.max_model_len : 8192;
    int64_t pages = o.kv_pages;
    if (pages <= 0) {
      // Two sequences of the whole context, within a bound on memory (the offline runner holds
      // one or two sequences at a time).
      constexpr int64_t kMaxDefaultBytes = int64_t{4} << 30;
      pages = 2 * ((std::min<int64_t>(context, 1 << 16) + ps - 1) / ps);
      pages = std::max<int64_t>(
          1, std::min(pages, kMaxDefaultBytes / std::max<int64_t>(1, runner->KvBytesPerPage(ps))));
    }
    runner->AllocateKvCache(pages, ps);
    state_->page_size = ps;
    for (int64_t p = pages - 1; p >= 0; --p) state_->free_pages.push_back(static_cast<int32_t>(p));
    state_->runner = std::move(runner);
  }

  std::string architecture() const override { return info().architecture; }
  int64_t vocab_size() const override { return info().vocab_size; }
  std::vector<int64_t> eos_token_ids() const override { return info().eos_token_ids; }
  int64_t max_context() const override { return info().max_model_len; }

  std::unique_ptr<ModelSequence> NewSequence() const override {
    return std::make_unique<DriverSequence>(state_);
  }

  PrefillResult Prefill(ModelSequence& base, const ModelInputs& in,
                        const CaptureOptions& capture) const override {
    DriverSequence& seq = As(base);
    Require(seq.length() == 0, ErrorCode::kInternal, "Prefill on a sequence that is not empty");
    const int64_t T = static_cast<int64_t>(in.input_ids.size());
    Require(T > 0, ErrorCode::kInvalidArgument, "input_ids is empty");
    CheckContext(T, "the prompt");
    for (int64_t i = 0; i < T; ++i)
      if (in.input_ids[i] < 0 || in.input_ids[i] >= info().vocab_size)
        CheckToken(in.input_ids[i], "input_ids[" + Str(i) + "]");

    std::lock_guard<std::mutex> lock(state_->mu);
    ModelRunner& runner = *state_->runner;
    PrefillResult result;
    std::vector<FeatureRef> feature_of(T);
    // The reference scatters image features, then video features, each in placeholder order.
    Fuse(in.images, false, in.input_ids, capture, feature_of, result.captured);
    Fuse(in.videos, true, in.input_ids, capture, feature_of, result.captured);

    const int64_t chunk = options_.prefill_chunk > 0 ? options_.prefill_chunk : T;
    const int64_t V = info().vocab_size;
    NamedTensors step_capture;
    runner.SetCapture({capture.hidden_states, capture.block_indices, false, &step_capture});
    for (int64_t c0 = 0; c0 < T; c0 += chunk) {
      const int64_t n = std::min(chunk, T - c0);
      ForwardBatch b = Batch(seq, c0, n);
      for (int64_t i = 0; i < n; ++i) b.token_ids[i] = static_cast<int32_t>(in.input_ids[c0 + i]);
      if (capture.all_logits)
        for (int64_t i = 0; i < n; ++i) b.logits_rows.push_back(static_cast<int32_t>(i));
      else if (c0 + n == T)
        b.logits_rows.push_back(static_cast<int32_t>(n - 1));
      for (int64_t i = 0; i < n; ++i) {
        const FeatureRef& f = feature_of[c0 + i];
        if (!f.features) continue;
        MediaSpan* last = b.media.empty() ? nullptr : &b.media.back();
        if (last && last->features == f.features && last->row + last->length == i &&
            last->offset + last->length == f.offset)
          ++last->length;
        else
          b.media.push_back({i, 1, f.features, f.offset});
      }
      std::vector<float> logits;
      runner.Execute(b, logits);
      seq.length_ += n;
      result.logits.insert(result.logits.end(), logits.begin(), logits.end());
      Merge(result.captured, step_capture, "", 0);
      step_capture.clear();
    }
    runner.SetCapture({});
    result.rows = static_cast<int64_t>(result.logits.size()) / V;
    // Block selections: the reference's slot count for a prompt of T tokens.
    for (auto& [name, t] : result.captured) {
      if (name.rfind("block_indices", 0) != 0) continue;
      const Shape s = t.shape();
      const int64_t B = info().msa_block_size, slots = std::min(s[2], (T + B - 1) / B);
      std::vector<int64_t> kept(s[0] * s[1] * slots);
      auto all = t.as<int64_t>();
      for (int64_t r = 0; r < s[0] * s[1]; ++r)
        std::copy_n(all.begin() + r * s[2], slots, kept.begin() + r * slots);
      t = HostTensor::FromInt64({s[0], s[1], slots}, kept);
    }
    return result;
  }

  std::vector<float> Decode(ModelSequence& base, int64_t token) const override {
    DriverSequence& seq = As(base);
    Require(seq.length() > 0, ErrorCode::kInternal, "Decode before Prefill");
    CheckToken(token, "token");
    CheckContext(seq.length() + 1, "the sequence");
    std::lock_guard<std::mutex> lock(state_->mu);
    ForwardBatch b = Batch(seq, seq.length(), 1);
    b.num_decodes = 1;
    b.token_ids[0] = static_cast<int32_t>(token);
    b.logits_rows = {0};
    std::vector<float> logits;
    state_->runner->Execute(b, logits);
    seq.length_ += 1;
    return logits;
  }

 private:
  const RunnerInfo& info() const { return state_->runner->info(); }

  static DriverSequence& As(ModelSequence& s) {
    auto* d = dynamic_cast<DriverSequence*>(&s);
    Require(d != nullptr, ErrorCode::kInternal, "sequence was not made by this model");
    return *d;
  }

  // One sequence's rows [c0, c0 + n) with its pages (reserved here); token ids left to fill.
  ForwardBatch Batch(DriverSequence& seq, int64_t c0, int64_t n) const {
    seq.Reserve(c0 + n);
    const int64_t ps = state_->page_size;
    ForwardBatch b;
    b.token_ids.resize(n);
    b.query_start = {0, static_cast<int32_t>(n)};
    b.context_lens = {static_cast<int32_t>(c0)};
    b.block_tables = seq.pages;
    b.max_pages_per_seq = static_cast<int32_t>(seq.pages.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = c0 + i;
      b.positions.push_back(static_cast<int32_t>(pos));
      b.slot_mapping.push_back(int64_t{seq.pages[pos / ps]} * ps + pos % ps);
    }
    return b;
  }

  void CheckContext(int64_t tokens, const std::string& what) const {
    const int64_t limit = info().max_model_len;
    Require(limit <= 0 || tokens <= limit, ErrorCode::kInvalidArgument,
            what + " would hold " + Str(tokens) + " tokens, beyond the model's context of " +
                Str(limit) + " (max_position_embeddings)");
  }

  void CheckToken(int64_t id, const std::string& what) const {
    Require(
        id >= 0 && id < info().vocab_size, ErrorCode::kInvalidArgument,
        what + " = " + Str(id) + " is outside the vocabulary [0, " + Str(info().vocab_size) + ")");
  }

  // Validates one modality against its placeholders, encodes its segments and records which
  // features each placeholder row takes.
  void Fuse(const std::optional<VisionInput>& vin, bool video, const std::vector<int64_t>& ids,
            const CaptureOptions& capture, std::vector<FeatureRef>& feature_of,
            NamedTensors& captured) const {
    const std::string kind = video ? "video" : "image";
    const int64_t token_id = video ? info().video_token_id : info().image_token_id;
    std::vector<int64_t> slots;
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == token_id) slots.push_back(static_cast<int64_t>(i));
    if (!vin) {
      Require(slots.empty(), ErrorCode::kUnprocessable,
              "input_ids hold " + Str(static_cast<int64_t>(slots.size())) + " " + kind +
                  " placeholder tokens but no " + kind + " pixels were given");
      return;
    }
    const int64_t pd = info().patch_dim;
    Require(vin->patch_dim == pd, ErrorCode::kInvalidArgument,
            kind + " pixel rows have " + Str(vin->patch_dim) + " values, expected " + Str(pd));
    Require(!vin->grids.empty(), ErrorCode::kInvalidArgument, kind + " grid_thw is empty");
    std::vector<std::vector<MediaSegment>> items;
    int64_t patches = 0, tokens = 0;
    for (size_t g = 0; g < vin->grids.size(); ++g) {
      try {
        items.push_back(state_->runner->SplitMedia(video, vin->grids[g]));
      } catch (const Error& e) {
        throw Error(e.code(),
                    kind + " grid_thw[" + Str(static_cast<int64_t>(g)) + "]: " + e.what());
      }
      for (const auto& s : items.back()) {
        patches += s.patch_rows;
        tokens += s.tokens;
      }
    }
    Require(static_cast<int64_t>(vin->pixels.size()) == vin->rows * pd, ErrorCode::kInvalidArgument,
            kind + " pixel_values size does not match its shape");
    for (size_t i = 0; i < vin->pixels.size(); ++i)
      if (!std::isfinite(vin->pixels[i]))
        throw Error(ErrorCode::kInvalidArgument,
                    kind + " pixel_values[" + Str(static_cast<int64_t>(i) / pd) + ", " +
                        Str(static_cast<int64_t>(i) % pd) + "] is not a finite number");
    Require(patches == vin->rows, ErrorCode::kInvalidArgument,
            kind + " grids describe " + Str(patches) + " patches but pixel_values has " +
                Str(vin->rows) + " rows");
    Require(static_cast<int64_t>(slots.size()) == tokens, ErrorCode::kUnprocessable,
            kind + " features and " + kind + " tokens do not match: input_ids hold " +
                Str(static_cast<int64_t>(slots.size())) + " placeholders, the grids give " +
                Str(tokens) + " tokens");

    ModelRunner& runner = *state_->runner;
    NamedTensors seg_capture;
    runner.SetCapture({false, false, capture.vision, &seg_capture});
    int64_t item_patch = 0, placeholder = 0;
    for (const auto& segments : items) {
      for (const MediaSegment& s : segments) {
        auto features = runner.Encode(vin->pixels.data() + (item_patch + s.patch_offset) * pd, s);
        for (int64_t i = 0; i < s.tokens; ++i) feature_of[slots[placeholder++]] = {features, i};
        Merge(captured, seg_capture, kind + ".", 0);
        seg_capture.clear();
      }
      item_patch += segments.back().patch_offset + segments.back().patch_rows;
    }
    runner.SetCapture({});
  }

  std::shared_ptr<State> state_;
  SingleSequenceOptions options_;
};

}  // namespace

std::unique_ptr<Model> MakeSingleSequenceModel(std::unique_ptr<ModelRunner> runner,
                                               const SingleSequenceOptions& options) {
  return std::make_unique<SingleSequenceModel>(std::move(runner), options);
}

}  // namespace m3::engine
