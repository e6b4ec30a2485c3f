// Sampling fields of OpenAI requests (see sampling_request.h).
#include "gateway/openai/sampling_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace m3::openai {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

std::vector<std::string> ParseStop(const FieldReader& body, const ApiLimits& limits) {
  const Json* v = body.Get("stop");
  if (!v) return {};
  std::vector<std::string> out;
  auto add = [&](const Json& s, const std::string& param) {
    if (!s.is_string()) {
      InvalidField(param, "'" + param + "' must be a string, got " + std::string(JsonTypeName(s)),
                   "invalid_type");
    }
    std::string text = s.get<std::string>();
    if (text.empty()) InvalidField(param, "'" + param + "' must not be an empty string");
    if (text.size() > limits.max_stop_string_bytes) {
      InvalidField(param, "'" + param + "' is longer than " +
                              std::to_string(limits.max_stop_string_bytes) + " bytes");
    }
    out.push_back(std::move(text));
  };
  if (v->is_string()) {
    add(*v, "stop");
  } else if (v->is_array()) {
    if (v->size() > limits.max_stop_strings) {
      InvalidField("stop", "'stop' has " + std::to_string(v->size()) +
                               " strings, more than the limit of " +
                               std::to_string(limits.max_stop_strings));
    }
    for (size_t i = 0; i < v->size(); ++i) add((*v)[i], "stop[" + std::to_string(i) + "]");
  } else {
    InvalidField(
        "stop",
        "'stop' must be a string or a list of strings, got " + std::string(JsonTypeName(*v)),
        "invalid_type");
  }
  return out;
}

std::vector<int32_t> ParseStopTokenIds(const FieldReader& body) {
  const Json* v = body.Array("stop_token_ids");
  if (!v) return {};
  std::vector<int32_t> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string param = "stop_token_ids[" + std::to_string(i) + "]";
    const Json& id = (*v)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxInt32) {
      InvalidField(param, "'" + param + "' must be a non-negative token id");
    }
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return out;
}

// OpenAI's logit_bias: {"<token id>": bias}. Ids must be the model's (vocab_size, when known);
// biases are clamped to [-100, 100] as OpenAI documents (-100 bans a token, +100 all but forces
// it).
std::vector<std::pair<int32_t, float>> ParseLogitBias(const FieldReader& body,
                                                      const ServedModel& model,
                                                      const ApiLimits& limits) {
  const Json* v = body.Get("logit_bias");
  if (!v || v->is_null()) return {};
  if (!v->is_object()) {
    InvalidField("logit_bias",
                 "'logit_bias' must be an object mapping token ids to biases, got " +
                     std::string(JsonTypeName(*v)),
                 "invalid_type");
  }
  if (v->size() > limits.max_logit_bias) {
    InvalidField("logit_bias", "'logit_bias' has " + std::to_string(v->size()) +
                                   " entries, more than the limit of " +
                                   std::to_string(limits.max_logit_bias));
  }
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, bias] : v->items()) {
    const std::string param = "logit_bias." + key;
    int64_t id = -1;
    bool digits = !key.empty() && key.size() <= 10;
    for (char c : key) digits = digits && c >= '0' && c <= '9';
    if (digits) id = std::stoll(key);
    if (!digits || id > kMaxInt32 || (model.vocab_size > 0 && id >= model.vocab_size)) {
      InvalidField(param, "'logit_bias' key '" + key + "' is not a token id of this model" +
                              (model.vocab_size > 0
                                   ? " (vocabulary of " + std::to_string(model.vocab_size) + ")"
                                   : std::string()));
    }
    if (!bias.is_number()) {
      InvalidField(param,
                   "'" + param + "' must be a number, got " + std::string(JsonTypeName(bias)),
                   "invalid_type");
    }
    const double b = bias.get<double>();
    if (!std::isfinite(b)) InvalidField(param, "'" + param + "' must be a finite number");
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(std::clamp(b, -100.0, 100.0)));
  }
  std::sort(out.begin(), out.end());
  // "5" and "05" name the same token: the last one wins would depend on key order, so refuse.
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].first == out[i - 1].first) {
      InvalidField("logit_bias",
                   "'logit_bias' names token " + std::to_string(out[i].first) + " more than once");
    }
  }
  return out;
}

// n: the number of choices, 1..limits.max_choices. best_of (the legacy completions option that
// draws best_of and returns the n most likely) is taken only equal to n, where it changes
// nothing: ranking choices by likelihood is not implemented.
int ParseChoices(const FieldReader& body, const ApiLimits& limits) {
  int n = 1;
  if (auto v =
          body.Int("n", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    if (*v < 1 || *v > limits.max_choices) {
      InvalidField("n", "'n' = " + std::to_string(*v) + " must be between 1 and " +
                            std::to_string(limits.max_choices));
    }
    n = static_cast<int>(*v);
  }
  if (auto v = body.Int("best_of", std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max());
      v && *v != n) {
    InvalidField("best_of",
                 "'best_of' = " + std::to_string(*v) +
                     " is not supported: this server returns every choice it draws, so "
                     "best_of must equal n (" +
                     std::to_string(n) + ")",
                 "unsupported_value");
  }
  return n;
}

}  // namespace

SamplingRequest ParseSampling(const FieldReader& body, Endpoint endpoint, const ServedModel& model,
                              const ApiLimits& limits) {
  SamplingRequest s;
  const GenerationConfig& g = model.generation;
  // The model authors' defaults; do_sample = false in generation_config means greedy.
  if (g.temperature) s.temperature = *g.temperature;
  if (g.do_sample && !*g.do_sample) s.temperature = 0.0;
  if (g.top_p) s.top_p = *g.top_p;
  if (g.top_k) s.top_k = *g.top_k;
  if (g.min_p) s.min_p = *g.min_p;
  if (g.repetition_penalty) s.repetition_penalty = *g.repetition_penalty;
  if (g.max_new_tokens) s.max_tokens = *g.max_new_tokens;

  s.n = ParseChoices(body, limits);

  // max_completion_tokens supersedes the deprecated max_tokens when both are given.
  if (auto v = body.Int("max_tokens", 1, kMaxInt32)) s.max_tokens = *v;
  if (auto v = body.Int("max_completion_tokens", 1, kMaxInt32)) s.max_tokens = *v;
  if (auto v = body.Number("temperature", 0.0, 2.0)) s.temperature = *v;
  if (auto v = body.Number("top_p", 0.0, 1.0, /*min_exclusive=*/true)) s.top_p = *v;
  if (auto v = body.Int("top_k", -1, kMaxInt32)) s.top_k = *v < 0 ? 0 : *v;
  if (auto v = body.Number("min_p", 0.0, 1.0)) s.min_p = *v;
  if (auto v = body.Number("repetition_penalty", 0.0, 2.0, true)) s.repetition_penalty = *v;
  if (auto v = body.Number("presence_penalty", -2.0, 2.0)) s.presence_penalty = *v;
  if (auto v = body.Number("frequency_penalty", -2.0, 2.0)) s.frequency_penalty = *v;
  if (const Json* v = body.Get("seed")) {
    if (v->is_number_unsigned()) {
      s.seed = v->get<uint64_t>();
    } else if (v->is_number_integer()) {
      InvalidField("seed", "'seed' must be a non-negative integer, got " +
                               std::to_string(v->get<int64_t>()));
    } else {
      InvalidField("seed", "'seed' must be an integer, got " + std::string(JsonTypeName(*v)),
                   "invalid_type");
    }
  }
  s.stop = ParseStop(body, limits);
  s.stop_token_ids = ParseStopTokenIds(body);
  s.logit_bias = ParseLogitBias(body, model, limits);
  if (auto v = body.Bool("ignore_eos")) s.ignore_eos = *v;
  if (auto v = body.Int("min_tokens", 0, kMaxInt32)) s.min_tokens = *v;
  if (auto v = body.Bool("skip_special_tokens")) s.skip_special_tokens = *v;
  if (auto v = body.Bool("include_stop_str_in_output")) s.include_stop_str_in_output = *v;
  if (s.max_tokens && s.min_tokens > *s.max_tokens) {
    InvalidField("min_tokens", "'min_tokens' (" + std::to_string(s.min_tokens) +
                                   ") must not exceed max_tokens (" +
                                   std::to_string(*s.max_tokens) + ")");
  }

  if (endpoint == Endpoint::kChatCompletions) {
    if (auto v = body.Bool("logprobs")) s.logprobs = *v;
    if (auto v = body.Int("top_logprobs", 0, limits.max_top_logprobs)) {
      if (!s.logprobs && *v > 0) {
        InvalidField("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
      }
      s.top_logprobs = static_cast<int>(*v);
    }
  } else {
    // The legacy completions API: logprobs is the number of alternatives, at most 5.
    if (auto v = body.Int("logprobs", 0, 5)) {
      s.logprobs = true;
      s.top_logprobs = static_cast<int>(*v);
    }
  }
  return s;
}

int64_t ResolveMaxTokens(const SamplingRequest& sampling, size_t prompt_tokens,
                         int64_t max_model_len, const std::string& prompt_param) {
  const int64_t prompt = static_cast<int64_t>(prompt_tokens);
  if (max_model_len > 0 && prompt >= max_model_len) {
    throw RequestError(ErrorCode::kInvalidArgument,
                       "the prompt is " + std::to_string(prompt) +
                           " tokens, which leaves no room in the model's context of " +
                           std::to_string(max_model_len) + " tokens",
                       prompt_param, "context_length_exceeded");
  }
  if (!sampling.max_tokens) {
    if (max_model_len <= 0) {
      throw RequestError(ErrorCode::kInvalidArgument,
                         "'max_tokens' is required: the model's context length is not known",
                         "max_tokens", "missing_required_parameter");
    }
    return max_model_len - prompt;
  }
  if (max_model_len > 0 && prompt + *sampling.max_tokens > max_model_len) {
    throw RequestError(ErrorCode::kInvalidArgument,
                       "the prompt (" + std::to_string(prompt) + " tokens) plus max_tokens (" +
                           std::to_string(*sampling.max_tokens) +
                           ") exceed the model's context of " + std::to_string(max_model_len) +
                           " tokens",
                       "max_tokens", "context_length_exceeded");
  }
  return *sampling.max_tokens;
}

}  // namespace m3::openai
