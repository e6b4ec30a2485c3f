// ChatRequest: a validated OpenAI `POST /v1/chat/completions` body, ready for prompt assembly
// (PromptBuilder) and media preprocessing: messages checked part by part (text, image_url
// {url, detail}, video_url {url}), the media items listed in order with their field paths,
// tools and tool_choice, chat_template_kwargs, the sampling fields and stream options.
#pragma once

#include <string>
#include <vector>

#include "gateway/content/media_ref.h"
#include "gateway/openai/field_reader.h"
#include "gateway/openai/request_common.h"
#include "gateway/openai/sampling_request.h"
#include "gateway/openai/served_model.h"
#include "gateway/text/prompt_builder.h"

namespace m3::openai {

// kRequired: at least one call (tool_choice "required" or a named function: forced_tool).
enum class ToolChoice { kAuto, kNone, kRequired };

struct ChatRequest {
  std::string model;
  // As sent (validated), with the assistant turns as templates read them: `reasoning` also as
  // `reasoning_content`, tool calls' JSON-text arguments as objects. PromptBuilder maps the
  // media parts.
  Json messages = Json::array();
  Json tools;  // null, or the tools list (dropped when tool_choice is none)
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string forced_tool;          // kRequired naming one function: only it may be called
  bool parallel_tool_calls = true;  // false: at most one call (exactly one when forced)
  Json chat_template_kwargs = Json::object();  // as sent (checked: CheckChatTemplateKwargs)
  bool add_generation_prompt = true;
  std::vector<content::MediaRef> media;  // in order of appearance, as FindMediaParts lists them
  SamplingRequest sampling;
  StreamOptions stream;

  // The template variables are `default_kwargs` (the server's) with chat_template_kwargs over
  // them (MergeChatTemplateKwargs).
  text::PromptInput ToPromptInput(const Json& default_kwargs = Json::object()) const;
  bool parse_tool_calls() const { return tools.is_array() && !tools.empty(); }
};

// Throws RequestError naming the field: 400 for wrong types and values (among them a tool
// call's arguments text that holds no JSON object, a thinking_mode the template does not know),
// 404 for another model, 413 for more media items than limits.max_media_items, 422 for a
// tool_choice naming a function that is not among the tools.
ChatRequest ParseChatRequest(const Json& body, const ServedModel& model, const ApiLimits& limits);

// The body's "messages": present, an array, not empty and within limits.max_messages (a
// RequestError naming "messages" otherwise). Chat completions and Anthropic's messages share it.
const Json& RequireMessages(const FieldReader& body, const ApiLimits& limits);

}  // namespace m3::openai
