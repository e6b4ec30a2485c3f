// Shared response JSON (see response_json.h).
#include "gateway/openai/response_json.h"

#include <string>

namespace m3::openai {
namespace {

using OJson = nlohmann::ordered_json;

OJson TokenEntry(const tok::Tokenizer& tokenizer, int32_t id, float logprob) {
  const int32_t ids[1] = {id};
  // The model's bytes may be a partial UTF-8 sequence; the dump later replaces it, "bytes"
  // keeps the truth.
  const std::string text = tokenizer.Decode(ids, /*skip_special_tokens=*/false);
  OJson bytes = OJson::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

}  // namespace

OJson UsageJson(const Usage& usage) {
  OJson u = {{"prompt_tokens", usage.prompt_tokens},
             {"completion_tokens", usage.completion_tokens},
             {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
  if (usage.cached_prompt_tokens > 0) {
    u["prompt_tokens_details"] = {{"cached_tokens", usage.cached_prompt_tokens}};
  }
  return u;
}

OJson ToolCallJson(const text::ToolCall& call, bool with_index) {
  OJson j = OJson::object();
  if (with_index) j["index"] = call.index;
  // A later piece of a streamed call: only its arguments fragment, as OpenAI streams them.
  if (with_index && call.id.empty()) {
    j["function"] = {{"arguments", call.arguments}};
    return j;
  }
  j["id"] = call.id;
  j["type"] = "function";
  j["function"] = {{"name", call.name}, {"arguments", call.arguments}};
  return j;
}

OJson ChatLogprobEntries(const tok::Tokenizer& tokenizer, std::span<const TokenLogprob> tokens) {
  OJson out = OJson::array();
  for (const TokenLogprob& t : tokens) {
    OJson entry = TokenEntry(tokenizer, t.id, t.logprob);
    OJson top = OJson::array();
    for (const auto& [id, lp] : t.top) top.push_back(TokenEntry(tokenizer, id, lp));
    entry["top_logprobs"] = std::move(top);
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace m3::openai
