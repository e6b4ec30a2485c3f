// FromProto / AppendOutput: field-by-field checks and the BF16 -> F32 pixel widening.
#include "engine/server/proto_convert.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "shared/error.h"

namespace m3::engine::server {
namespace {

std::string Shape(const m3::proto::Tensor& t) {
  std::string s = "[";
  for (int i = 0; i < t.shape_size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape(i));
  return s + "]";
}

void DecodePixels(const m3::proto::Tensor& t, const std::string& what, int64_t patch_dim,
                  MediaItem& item) {
  Require(t.shape_size() == 2 && t.shape(0) > 0 && t.shape(1) > 0, ErrorCode::kInvalidArgument,
          what + ": pixel_values must have shape [patches, " + std::to_string(patch_dim) +
              "], got " + Shape(t));
  const int64_t rows = t.shape(0), cols = t.shape(1);
  Require(rows <= (int64_t{1} << 28) / cols, ErrorCode::kInvalidArgument,
          what + ": pixel_values shape " + Shape(t) + " is implausibly large");
  size_t elem = 0;
  if (t.dtype() == "F32") {
    elem = 4;
  } else if (t.dtype() == "BF16") {
    elem = 2;
  } else {
    throw Error(ErrorCode::kInvalidArgument,
                what + ": pixel_values dtype '" + t.dtype() + "' is not supported (F32 or BF16)");
  }
  const size_t n = static_cast<size_t>(rows * cols);
  Require(t.data().size() == n * elem, ErrorCode::kInvalidArgument,
          what + ": pixel_values has " + std::to_string(t.data().size()) + " bytes but shape " +
              Shape(t) + " of " + t.dtype() + " needs " + std::to_string(n * elem));
  item.patch_dim = cols;
  item.patches.resize(n);
  const char* src = t.data().data();
  if (elem == 4) {
    std::memcpy(item.patches.data(), src, n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      const uint32_t bits = static_cast<uint32_t>(h) << 16;
      std::memcpy(&item.patches[i], &bits, 4);
    }
  }
}

}  // namespace

EngineRequest FromProto(const v1::GenerateRequest& in, EngineCore& core,
                        const StructuredOutputCompiler* structured) {
  static std::atomic<uint64_t> next_id{0};
  const RunnerInfo& info = core.info();
  EngineRequest r;
  r.id = in.request_id().empty() ? "req-" + std::to_string(next_id.fetch_add(1)) : in.request_id();
  Require(r.id.size() <= 256, ErrorCode::kInvalidArgument, "request_id is over 256 bytes");
  r.prompt.assign(in.token_ids().begin(), in.token_ids().end());
  int counts[2] = {0, 0};
  for (const v1::MultimodalItem& m : in.media()) {
    MediaItem item;
    Require(
        m.kind() == v1::MultimodalItem::KIND_IMAGE || m.kind() == v1::MultimodalItem::KIND_VIDEO,
        ErrorCode::kInvalidArgument,
        "media[" + std::to_string(counts[0] + counts[1]) + "]: kind must be image or video");
    item.video = m.kind() == v1::MultimodalItem::KIND_VIDEO;
    const std::string what =
        std::string(item.video ? "video " : "image ") + std::to_string(counts[item.video]++);
    Require(
        m.grid_thw_size() == 3, ErrorCode::kInvalidArgument,
        what + ": grid_thw must have 3 values (t, h, w), got " + std::to_string(m.grid_thw_size()));
    for (int k = 0; k < 3; ++k) item.grid_thw[static_cast<size_t>(k)] = m.grid_thw(k);
    DecodePixels(m.pixel_values(), what, info.patch_dim, item);
    // Unset: the count the grid makes. Grids are bounded by ValidateRequest, which refuses
    // what is left at 0 here; their product is not formed before (it could overflow).
    const int64_t merge = std::max<int64_t>(info.spatial_merge_size, 1);
    const bool bounded = std::all_of(item.grid_thw.begin(), item.grid_thw.end(), GridValueInBounds);
    item.placeholder_tokens =
        m.placeholder_tokens() != 0 ? m.placeholder_tokens()
        : bounded ? item.grid_thw[0] * item.grid_thw[1] * item.grid_thw[2] / (merge * merge)
                  : 0;
    r.media.push_back(std::move(item));
  }
  const v1::SamplingParams& s = in.sampling();
  SamplingRequest q;
  if (s.has_temperature()) q.temperature = s.temperature();
  if (s.has_top_p()) q.top_p = s.top_p();
  if (s.has_top_k()) q.top_k = s.top_k() <= 0 ? 0 : s.top_k();
  if (s.has_min_p()) q.min_p = s.min_p();
  if (s.has_repetition_penalty()) q.repetition_penalty = s.repetition_penalty();
  q.presence_penalty = s.presence_penalty();
  q.frequency_penalty = s.frequency_penalty();
  if (s.has_seed()) q.seed = s.seed();
  q.max_tokens = s.max_tokens();
  q.min_tokens = s.min_tokens();
  // More than the vocabulary must repeat ids; the bound keeps the message limit finite.
  Require(s.stop_token_ids_size() <= info.vocab_size, ErrorCode::kInvalidArgument,
          "sampling.stop_token_ids has " + std::to_string(s.stop_token_ids_size()) +
              " ids; at most the vocabulary size (" + std::to_string(info.vocab_size) + ")");
  q.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  q.ignore_eos = s.ignore_eos();
  Require(s.logit_bias_size() <= info.vocab_size, ErrorCode::kInvalidArgument,
          "sampling.logit_bias has " + std::to_string(s.logit_bias_size()) +
              " entries; at most the vocabulary size (" + std::to_string(info.vocab_size) + ")");
  q.logit_bias.assign(s.logit_bias().begin(), s.logit_bias().end());
  Require(s.logprobs() >= 0, ErrorCode::kInvalidArgument, "sampling.logprobs must be >= 0");
  q.logprobs = s.logprobs() > 0 ? s.logprobs() : (s.return_logprobs() ? 0 : -1);
  r.sampling = ResolveSamplingParams(q, core.config().generation, info.eos_token_ids,
                                     info.vocab_size, core.FreshSeed());
  if (in.has_structured()) {
    Require(structured != nullptr, ErrorCode::kInvalidArgument,
            "this engine does not take structured outputs");
    // Compiled here, on the gRPC thread: the engine loop never waits for a compile.
    r.grammar = structured->Compile(in.structured());
    if (in.structured().has_start_after_token()) {
      const int32_t t = in.structured().start_after_token();
      Require(t >= 0 && t < info.vocab_size, ErrorCode::kInvalidArgument,
              "structured.start_after_token " + std::to_string(t) + " is outside the vocabulary");
      r.grammar_start_after = t;
    }
  }
  return r;
}

void AppendOutput(const RequestOutput& out, v1::GenerateResponse* msg) {
  for (int32_t t : out.tokens) msg->add_token_ids(t);
  for (const SampledToken& l : out.logprobs) {
    v1::TokenLogprob* chosen = msg->add_logprobs();
    chosen->set_token_id(l.token);
    chosen->set_logprob(l.logprob);
    for (const auto& [id, lp] : l.top) {
      v1::TokenLogprob* t = msg->add_logprobs();
      t->set_token_id(id);
      t->set_logprob(lp);
    }
  }
  if (out.finish == FinishReason::kNone) return;
  switch (out.finish) {
    case FinishReason::kStop:
      msg->set_finish_reason(v1::GenerateResponse::FINISH_REASON_STOP);
      break;
    case FinishReason::kLength:
      msg->set_finish_reason(v1::GenerateResponse::FINISH_REASON_LENGTH);
      break;
    default:
      msg->set_finish_reason(v1::GenerateResponse::FINISH_REASON_ABORT);
      break;
  }
  msg->set_prompt_tokens(static_cast<int32_t>(out.prompt_tokens));
  msg->set_completion_tokens(static_cast<int32_t>(out.completion_tokens));
  msg->set_cached_prompt_tokens(static_cast<int32_t>(out.cached_prompt_tokens));
  msg->set_seed(out.seed);
}

}  // namespace m3::engine::server
