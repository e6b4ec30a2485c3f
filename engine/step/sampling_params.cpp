// ResolveSamplingParams: request values over generation_config.json defaults, range checks.
#include "engine/step/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "shared/error.h"

namespace m3::engine {
namespace {

double CheckRange(double v, const char* name, double lo, double hi) {
  Require(std::isfinite(v) && v >= lo && v <= hi, ErrorCode::kInvalidArgument,
          std::string("sampling.") + name + " = " + std::to_string(v) + " is outside [" +
              std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

}  // namespace

SamplingParams ResolveSamplingParams(const SamplingRequest& r, const GenerationConfig& d,
                                     const std::vector<int64_t>& model_eos_ids, int64_t vocab,
                                     uint64_t fresh_seed) {
  SamplingParams p;
  // A generation_config with do_sample = false means greedy unless the request asks otherwise.
  const double default_temperature =
      d.do_sample.has_value() && !*d.do_sample ? 0.0 : d.temperature.value_or(1.0);
  p.temperature = CheckRange(r.temperature.value_or(default_temperature), "temperature", 0, 1e4);
  p.top_p = CheckRange(r.top_p.value_or(d.top_p.value_or(1.0)), "top_p", 0, 1);
  Require(p.top_p > 0, ErrorCode::kInvalidArgument, "sampling.top_p must be in (0, 1], got 0");
  p.top_k = r.top_k.value_or(d.top_k.value_or(0));
  Require(p.top_k >= -1, ErrorCode::kInvalidArgument,
          "sampling.top_k must be >= -1 (0 or -1 = off), got " + std::to_string(p.top_k));
  if (p.top_k < 0) p.top_k = 0;
  p.min_p = CheckRange(r.min_p.value_or(d.min_p.value_or(0.0)), "min_p", 0, 1);
  p.repetition_penalty =
      CheckRange(r.repetition_penalty.value_or(d.repetition_penalty.value_or(1.0)),
                 "repetition_penalty", 0, 1e4);
  Require(p.repetition_penalty > 0, ErrorCode::kInvalidArgument,
          "sampling.repetition_penalty must be > 0 (1 = off)");
  p.presence_penalty = CheckRange(r.presence_penalty, "presence_penalty", -2, 2);
  p.frequency_penalty = CheckRange(r.frequency_penalty, "frequency_penalty", -2, 2);
  p.seed = r.seed.value_or(fresh_seed);
  Require(r.max_tokens > 0, ErrorCode::kInvalidArgument,
          "sampling.max_tokens must be > 0, got " + std::to_string(r.max_tokens));
  p.max_tokens = r.max_tokens;
  Require(r.min_tokens >= 0 && r.min_tokens <= r.max_tokens, ErrorCode::kInvalidArgument,
          "sampling.min_tokens must be in [0, max_tokens], got " + std::to_string(r.min_tokens));
  p.min_tokens = r.min_tokens;
  for (int32_t t : r.stop_token_ids)
    Require(t >= 0 && t < vocab, ErrorCode::kInvalidArgument,
            "sampling.stop_token_ids: " + std::to_string(t) + " is outside the vocabulary [0, " +
                std::to_string(vocab) + ")");
  p.stop_token_ids = r.stop_token_ids;
  const std::vector<int64_t>& eos = d.eos_token_ids.empty() ? model_eos_ids : d.eos_token_ids;
  for (int64_t e : eos)
    if (e >= 0 && e < vocab) p.eos_token_ids.push_back(static_cast<int32_t>(e));
  p.ignore_eos = r.ignore_eos;
  for (const auto& [t, bias] : r.logit_bias) {
    Require(t >= 0 && t < vocab, ErrorCode::kInvalidArgument,
            "sampling.logit_bias: " + std::to_string(t) + " is outside the vocabulary [0, " +
                std::to_string(vocab) + ")");
    Require(std::isfinite(bias), ErrorCode::kInvalidArgument,
            "sampling.logit_bias[" + std::to_string(t) + "] is not a finite number");
    p.logit_bias.emplace_back(t, std::clamp(bias, -100.0f, 100.0f));
  }
  std::sort(p.logit_bias.begin(), p.logit_bias.end());
  for (size_t i = 1; i < p.logit_bias.size(); ++i)
    Require(p.logit_bias[i].first != p.logit_bias[i - 1].first, ErrorCode::kInvalidArgument,
            "sampling.logit_bias names token " + std::to_string(p.logit_bias[i].first) + " twice");
  Require(r.logprobs <= 20, ErrorCode::kInvalidArgument,
          "sampling.logprobs must be <= 20, got " + std::to_string(r.logprobs));
  p.return_logprobs = r.logprobs >= 0;
  p.logprobs = r.logprobs > 0 ? r.logprobs : 0;
  return p;
}

}  // namespace m3::engine
