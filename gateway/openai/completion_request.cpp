// Validation of completion bodies (see completion_request.h).
#include "gateway/openai/completion_request.h"

namespace m3::openai {
namespace {

void ParsePrompt(const Json& prompt, const std::string& path, int64_t vocab_size,
                 CompletionRequest& out, bool nested) {
  if (prompt.is_string()) {
    out.prompt = prompt.get<std::string>();
    return;
  }
  if (!prompt.is_array()) {
    InvalidField(path,
                 "'" + path + "' must be a string or a list of token ids, got " +
                     std::string(JsonTypeName(prompt)),
                 "invalid_type");
  }
  if (prompt.empty()) InvalidField(path, "'" + path + "' must not be empty");
  if (!nested && (prompt[0].is_string() || prompt[0].is_array())) {
    // A batch of prompts: one is served per request.
    if (prompt.size() != 1) {
      InvalidField(path,
                   "'" + path + "' holds " + std::to_string(prompt.size()) +
                       " prompts; this server takes one prompt per request",
                   "unsupported_value");
    }
    ParsePrompt(prompt[0], path + "[0]", vocab_size, out, true);
    return;
  }
  out.prompt_is_ids = true;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string param = path + "[" + std::to_string(i) + "]";
    const Json& id = prompt[i];
    if (!id.is_number_integer()) {
      InvalidField(param,
                   "'" + param + "' must be a token id, got " + std::string(JsonTypeName(id)),
                   "invalid_type");
    }
    const int64_t v = id.get<int64_t>();
    if (v < 0 || (vocab_size > 0 && v >= vocab_size)) {
      InvalidField(param, "'" + param + "' = " + std::to_string(v) +
                              " is not a token id of this model (vocabulary of " +
                              std::to_string(vocab_size) + ")");
    }
    out.prompt_ids.push_back(static_cast<int32_t>(v));
  }
}

}  // namespace

CompletionRequest ParseCompletionRequest(const Json& body_json, const ServedModel& model,
                                         const ApiLimits& limits, int64_t vocab_size) {
  const FieldReader body(body_json, "");
  CompletionRequest req;
  req.model = ParseModel(body, model);
  const Json* prompt = body.Get("prompt");
  if (!prompt) InvalidField("prompt", "'prompt' is required", "missing_required_parameter");
  ParsePrompt(*prompt, "prompt", vocab_size, req, false);
  if (body.Bool("echo").value_or(false)) {
    InvalidField("echo", "'echo' is not supported: the response holds the completion only",
                 "unsupported_parameter");
  }
  if (auto suffix = body.String("suffix"); suffix && !suffix->empty()) {
    InvalidField("suffix", "'suffix' is not supported: this model does not fill in the middle",
                 "unsupported_parameter");
  }
  RejectUnsupported(body);
  req.sampling = ParseSampling(body, Endpoint::kCompletions, model, limits);
  req.sampling.structured = ParseStructuredOutput(body);
  req.stream = ParseStreamOptions(body);
  (void)body.String("user");
  return req;
}

}  // namespace m3::openai
