// End-to-end test of `m3-gateway render-chat`: the printed prompt equals Python jinja2's
// rendering byte for byte (no added newline), and template errors exit non-zero with the
// template line on stderr.
#include <doctest/doctest.h>

#include "tests/template/reference.h"
#include "tests/test_util.h"

namespace {

const nlohmann::ordered_json& Conversation(const std::string& name) {
  static const auto all = nlohmann::ordered_json::parse(
      m3::test::ReadFile(m3::test::DataPath("chat_templates/conversations.json")));
  for (const auto& c : all) {
    if (c["name"] == name) return c["request"];
  }
  FAIL("no conversation " << name);
  static const nlohmann::ordered_json none;
  return none;
}

}  // namespace

TEST_CASE("render-chat prints exactly the Python rendering") {
  std::string dir = m3::test::TempDir();
  for (const char* conv :
       {"tools_available", "parallel_tool_calls", "reasoning_content", "content_parts"}) {
    for (const char* tmpl :
         {"MiniMax-M2.jinja", "Qwen3-0.6B.jinja", "Llama-3.2-3B-Instruct.jinja"}) {
      CAPTURE(conv);
      CAPTURE(tmpl);
      std::string request = dir + "/request.json";
      m3::test::WriteFile(request, Conversation(conv).dump());
      std::string path = m3::test::DataPath(std::string("chat_templates/") + tmpl);
      auto ref = m3::test::RenderWithPython({{path, Conversation(conv)}});
      auto r = m3::test::RunProcess({m3::test::BinPath("m3-gateway"), "render-chat", "--template",
                                     path, "--request", request});
      if (ref[0].ok) {
        CHECK(r.exit_code == 0);
        CHECK(r.out == ref[0].output);
      } else {
        CHECK(r.exit_code != 0);
      }
    }
  }
}

TEST_CASE("render-chat reports template errors with the line and a non-zero exit") {
  std::string dir = m3::test::TempDir();
  std::string request = dir + "/request.json";
  m3::test::WriteFile(request, Conversation("tool_without_call").dump());
  auto r = m3::test::RunProcess({m3::test::BinPath("m3-gateway"), "render-chat", "--template",
                                 m3::test::DataPath("chat_templates/MiniMax-M2.jinja"), "--request",
                                 request});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("MiniMax-M2.jinja:141: template raised: Message has tool role") !=
        std::string::npos);

  m3::test::WriteFile(dir + "/bad.jinja", "ok\n{% for x in %}");
  r = m3::test::RunProcess({m3::test::BinPath("m3-gateway"), "render-chat", "--template",
                            dir + "/bad.jinja", "--request", request});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("bad.jinja:2:") != std::string::npos);

  m3::test::WriteFile(dir + "/nomessages.json", R"({"add_generation_prompt": true})");
  r = m3::test::RunProcess({m3::test::BinPath("m3-gateway"), "render-chat", "--template",
                            dir + "/bad.jinja", "--request", dir + "/nomessages.json"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("messages") != std::string::npos);
}

TEST_CASE("render-chat refuses hostile templates and requests with a message and exit 2") {
  std::string dir = m3::test::TempDir();
  std::string request = dir + "/request.json";
  m3::test::WriteFile(request, Conversation("user_only").dump());
  const std::string tmpl = m3::test::DataPath("chat_templates/Qwen3-0.6B.jinja");

  // A request nested 20k deep: refused before it is copied or converted.
  std::string deep = R"({"messages": [{"role": "user", "content": )";
  deep += std::string(20000, '[') + std::string(20000, ']') + "}]}";
  m3::test::WriteFile(dir + "/deep.json", deep);
  auto r = m3::test::RunProcess({m3::test::BinPath("m3-gateway"), "render-chat", "--template", tmpl,
                                 "--request", dir + "/deep.json"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("request JSON nested deeper than 256") != std::string::npos);

  // 5k nested parentheses in the template.
  m3::test::WriteFile(dir + "/parens.jinja",
                      "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}");
  r = m3::test::RunProcess({m3::test::BinPath("m3-gateway"), "render-chat", "--template",
                            dir + "/parens.jinja", "--request", request});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("parens.jinja:1: template nesting deeper than 256") != std::string::npos);

  // The limits are flags: a real template fails at a tiny output limit, renders at the default.
  r = m3::test::RunProcess({m3::test::BinPath("m3-gateway"), "render-chat", "--template", tmpl,
                            "--request", request, "--template-max-output-bytes", "10"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("template output exceeds 10 bytes") != std::string::npos);
  r = m3::test::RunProcess(
      {m3::test::BinPath("m3-gateway"), "render-chat", "--template", tmpl, "--request", request});
  CHECK(r.exit_code == 0);
  CHECK_FALSE(r.out.empty());
}
