// Output parsing options per request (see output_options.h).
#include "gateway/openai/output_options.h"

namespace m3::openai {
namespace {

text::StopOptions StopFor(const SamplingRequest& s, std::span<const int64_t> eos_token_ids) {
  text::StopOptions stop;
  stop.stop_strings = s.stop;
  stop.include_stop_str_in_output = s.include_stop_str_in_output;
  if (!s.ignore_eos) {
    for (int64_t id : eos_token_ids) stop.stop_token_ids.push_back(static_cast<int32_t>(id));
  }
  for (int32_t id : s.stop_token_ids) stop.stop_token_ids.push_back(id);
  return stop;
}

}  // namespace

bool PromptOpensReasoning(std::string_view rendered, std::string_view start_tag) {
  while (!rendered.empty() &&
         (rendered.back() == '\n' || rendered.back() == ' ' || rendered.back() == '\r')) {
    rendered.remove_suffix(1);
  }
  return rendered.size() >= start_tag.size() &&
         rendered.substr(rendered.size() - start_tag.size()) == start_tag;
}

text::OutputParserOptions ChatOutputOptions(const ChatRequest& request,
                                            std::span<const int64_t> eos_token_ids,
                                            std::string_view rendered_prompt,
                                            const text::ChatFormat& format) {
  text::OutputParserOptions o;
  o.skip_special_tokens = request.sampling.skip_special_tokens;
  o.stop = StopFor(request.sampling, eos_token_ids);
  o.parse_tool_calls = request.parse_tool_calls();
  if (o.parse_tool_calls) o.tools = request.tools;
  text::ApplyChatFormat(format, rendered_prompt, o);
  return o;
}

text::OutputParserOptions CompletionOutputOptions(const CompletionRequest& request,
                                                  std::span<const int64_t> eos_token_ids) {
  text::OutputParserOptions o;
  o.skip_special_tokens = request.sampling.skip_special_tokens;
  o.stop = StopFor(request.sampling, eos_token_ids);
  o.parse_reasoning = false;  // a raw completion is text as generated
  o.parse_tool_calls = false;
  return o;
}

}  // namespace m3::openai
