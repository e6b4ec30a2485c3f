// Public API of the chat-template engine: parse a Hugging Face Jinja2 chat template once and
// render it with the variables apply_chat_template passes (messages, tools,
// add_generation_prompt, bos_token, eos_token, ...). Rendering follows Python jinja2 with
// trim_blocks=True, lstrip_blocks=True and the transformers helpers (raise_exception,
// strftime_now, the tojson override), so the prompt is byte-identical to the reference.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/template/template_limits.h"

namespace m3::tmpl {

struct Program;  // the parsed template (AST); defined in ast.h

class ChatTemplate {
 public:
  // Throws m3::Error(kInvalidArgument) with "<name>:<line>: ..." on a syntax error or an
  // unsupported construct ({% extends %}, {% include %}, ...), and m3::Error(kTooLarge) when the
  // source exceeds `limits` (size, nesting). The limits are kept for every Render.
  static ChatTemplate Parse(std::string_view source, const std::string& name = "template",
                            const TemplateLimits& limits = {});

  // Renders with `context` as the template globals. Throws m3::Error(kInvalidArgument) with the
  // template line for runtime errors, and for raise_exception("...") from the template itself
  // (the message is then "<name>:<line>: template raised: <message>"); m3::Error(kTooLarge)
  // when the context or the rendering exceeds the limits (nesting, sizes, loop iterations,
  // work), naming the limit.
  std::string Render(const nlohmann::ordered_json& context) const;

  const std::string& name() const;
  const TemplateLimits& limits() const { return limits_; }

 private:
  std::shared_ptr<const Program> program_;
  TemplateLimits limits_;
};

// Reads <model_dir>/chat_template.jinja, else chat_template.json's "chat_template", else
// tokenizer_config.json's "chat_template" (a string, or a list of {name, template} from which
// "default" is taken). Throws kNotFound when none provides one.
std::string LoadChatTemplateSource(const std::string& model_dir);

}  // namespace m3::tmpl
