// chat_template_kwargs: the chat template variables a chat request passes to the template
// (vLLM's name), e.g. MiniMax-M3's `thinking_mode`. The server's defaults
// (--default-chat-template-kwargs) and a request's own are checked the same way, and a
// request's override the defaults key by key.
#pragma once

#include <string>

#include "gateway/openai/field_reader.h"

namespace m3::openai {

// The thinking modes the MiniMax-M3 template knows ("enabled", "disabled", "adaptive").
bool IsThinkingMode(const std::string& mode);

// Checks `kwargs` (at `path`, e.g. "chat_template_kwargs"): a JSON object whose
// `thinking_mode` is a thinking mode and whose `model_identity` is a string, either may be
// null. Throws a 400 RequestError naming the field.
void CheckChatTemplateKwargs(const Json& kwargs, const std::string& path);

// `defaults` with each key of `request` set over it; a null in `request` removes the key (so a
// request can unset a server default: an unset thinking_mode is the template's own default).
Json MergeChatTemplateKwargs(const Json& defaults, const Json& request);

}  // namespace m3::openai
