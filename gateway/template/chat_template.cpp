// ChatTemplate: parse once, render many times (see chat_template.h).
#include "gateway/template/chat_template.h"

#include "gateway/template/ast.h"
#include "gateway/template/evaluator.h"
#include "gateway/template/parser.h"

namespace m3::tmpl {

ChatTemplate ChatTemplate::Parse(std::string_view source, const std::string& name,
                                 const TemplateLimits& limits) {
  ChatTemplate t;
  t.program_ = ParseProgram(source, name, limits);
  t.limits_ = limits;
  return t;
}

std::string ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  Evaluator evaluator(*program_, context, limits_);
  return evaluator.Render();
}

const std::string& ChatTemplate::name() const {
  return program_->name;
}

}  // namespace m3::tmpl
