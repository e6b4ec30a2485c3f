// Checking and merging chat template kwargs (see chat_template_kwargs.h).
#include "gateway/openai/chat_template_kwargs.h"

namespace m3::openai {

bool IsThinkingMode(const std::string& mode) {
  return mode == "enabled" || mode == "disabled" || mode == "adaptive";
}

void CheckChatTemplateKwargs(const Json& kwargs, const std::string& path) {
  const FieldReader r(kwargs, path);
  if (auto mode = r.String("thinking_mode"); mode && !IsThinkingMode(*mode)) {
    InvalidField(r.Path("thinking_mode"),
                 Cat({"'", r.Path("thinking_mode"),
                      "' must be \"enabled\", \"disabled\" or \"adaptive\", got \"", *mode, "\""}));
  }
  (void)r.String("model_identity");
}

Json MergeChatTemplateKwargs(const Json& defaults, const Json& request) {
  Json merged = defaults.is_object() ? defaults : Json::object();
  if (!request.is_object()) return merged;
  for (const auto& [key, value] : request.items()) {
    if (value.is_null()) {
      merged.erase(key);
    } else {
      merged[key] = value;
    }
  }
  return merged;
}

}  // namespace m3::openai
