// Failures carry the template name and line: syntax errors, unsupported tags, unknown filters
// and tests, runtime type errors, undefined misuse, and raise_exception from the template.
// Also covers LoadChatTemplateSource's lookup order.
#include <doctest/doctest.h>

#include <string>

#include "gateway/template/chat_template.h"
#include "shared/error.h"
#include "tests/test_util.h"

namespace {

std::string ErrorOf(const std::string& source,
                    const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  try {
    m3::tmpl::ChatTemplate::Parse(source, "t.jinja").Render(ctx);
  } catch (const m3::Error& e) {
    CHECK(e.code() == m3::ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "<no error>";
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("syntax errors name the line") {
  CHECK(Contains(ErrorOf("a\nb\n{% if x %}\nunclosed"), "t.jinja:"));
  CHECK(Contains(ErrorOf("a\nb\n{% if x %}\nunclosed"), "endif"));
  CHECK(Contains(ErrorOf("line1\n{{ 1 + }}"), "t.jinja:2:"));
  CHECK(Contains(ErrorOf("\n\n{% for x in %}{% endfor %}"), "t.jinja:3:"));
  CHECK(Contains(ErrorOf("{{ 'unterminated }}"), "t.jinja:1:"));
  CHECK(Contains(ErrorOf("x\n{# no end"), "t.jinja:2: Missing end of comment tag"));
  CHECK(Contains(ErrorOf("{% endif %}"), "unknown tag 'endif'"));
  CHECK(Contains(ErrorOf("{{ (1 }}"), "t.jinja:1:"));
}

TEST_CASE("unsupported constructs are refused with their line") {
  CHECK(Contains(ErrorOf("\n{% extends 'base.html' %}"),
                 "t.jinja:2: '{% extends %}' is not supported"));
  CHECK(Contains(ErrorOf("{% include 'x' %}"), "'{% include %}' is not supported"));
  CHECK(Contains(ErrorOf("{% import 'x' as y %}"), "not supported"));
  CHECK(Contains(ErrorOf("{% for x in y recursive %}{% endfor %}"),
                 "recursive loops are not supported"));
}

TEST_CASE("runtime errors name the line of the failing expression") {
  CHECK(Contains(ErrorOf("ok\n\n{{ x | nosuchfilter }}"),
                 "t.jinja:3: No filter named 'nosuchfilter'."));
  CHECK(Contains(ErrorOf("{% if true %}\n{{ 1 is nosuchtest }}{% endif %}"),
                 "t.jinja:2: No test named 'nosuchtest'."));
  CHECK(Contains(ErrorOf("\n{{ 'a' + 1 }}"),
                 "t.jinja:2: can only concatenate str (not \"int\") to str"));
  CHECK(Contains(ErrorOf("{{ u.attr }}"), "'u' is undefined"));
  CHECK(Contains(ErrorOf("{{ d.a.b }}", {{"d", nlohmann::ordered_json::object()}}),
                 "'dict object' has no attribute 'a'"));
  CHECK(Contains(ErrorOf("{% for x in 5 %}{% endfor %}"), "'int' object is not iterable"));
  CHECK(Contains(ErrorOf("{{ [1].append(2) }}"), "unsafe"));
  CHECK(Contains(ErrorOf("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"),
                 "maximum recursion depth"));
}

TEST_CASE("raise_exception surfaces the template's message and line") {
  std::string e = ErrorOf(
      "{% for m in messages %}\n{% if m.role == 'system' %}\n{{ raise_exception('System role not "
      "supported') }}\n{% endif %}{% endfor %}",
      {{"messages", {{{"role", "system"}, {"content", "x"}}}}});
  CHECK(e == "t.jinja:3: template raised: System role not supported");
}

TEST_CASE("render-time values: bos/eos and generation prompt pass through") {
  auto t = m3::tmpl::ChatTemplate::Parse(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}");
  nlohmann::ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                {"add_generation_prompt", true},
                                {"bos_token", "<s>"},
                                {"eos_token", "</s>"}};
  CHECK(t.Render(ctx) == "<s><user>hi<assistant></s>");
  ctx["add_generation_prompt"] = false;
  CHECK(t.Render(ctx) == "<s><user>hi</s>");
  CHECK(t.name() == "template");
}

TEST_CASE("LoadChatTemplateSource prefers chat_template.jinja, then tokenizer_config.json") {
  std::string dir = m3::test::TempDir();
  CHECK_THROWS_AS(m3::tmpl::LoadChatTemplateSource(dir), m3::Error);
  m3::test::WriteFile(dir + "/tokenizer_config.json", R"({"chat_template": "from config"})");
  CHECK(m3::tmpl::LoadChatTemplateSource(dir) == "from config");
  m3::test::WriteFile(
      dir + "/tokenizer_config.json",
      R"({"chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "dflt"}]})");
  CHECK(m3::tmpl::LoadChatTemplateSource(dir) == "dflt");
  m3::test::WriteFile(dir + "/tokenizer_config.json",
                      R"({"chat_template": [{"name": "tool_use", "template": "tools"}]})");
  CHECK_THROWS_AS(m3::tmpl::LoadChatTemplateSource(dir), m3::Error);
  m3::test::WriteFile(dir + "/tokenizer_config.json", R"({"bos_token": "<s>"})");
  CHECK_THROWS_AS(m3::tmpl::LoadChatTemplateSource(dir), m3::Error);
  m3::test::WriteFile(dir + "/chat_template.jinja", "from jinja file");
  CHECK(m3::tmpl::LoadChatTemplateSource(dir) == "from jinja file");
}
