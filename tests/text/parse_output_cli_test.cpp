// `m3-gateway parse-output` as a user runs it: the M3 test model's output parsed whole and one
// token at a time to the same JSON line, the M2 format from an M2 model directory, the parser
// flags (of serve too), and bad input refused with a message and a non-zero exit.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

using Json = nlohmann::json;

namespace {

const std::string NS = "]<]minimax[>[";

m3::test::ProcessResult ParseOutput(const std::string& model, const std::string& request,
                                    const std::string& text, std::vector<std::string> extra = {}) {
  const std::string dir = m3::test::TempDir();
  m3::test::WriteFile(dir + "/req.json", request);
  m3::test::WriteFile(dir + "/out.txt", text);
  std::vector<std::string> argv = {m3::test::BinPath("m3-gateway"),
                                   "parse-output",
                                   "--model",
                                   m3::test::DataPath(model),
                                   "--request",
                                   dir + "/req.json",
                                   "--text-file",
                                   dir + "/out.txt"};
  for (auto& e : extra) argv.push_back(std::move(e));
  return m3::test::RunProcess(argv);
}

const std::string kRequest = R"({"tools": [{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
  "days": {"type": "integer"}, "opts": {"type": "object", "properties": {
  "hours": {"type": "array", "items": {"type": "integer"}}}}}}}}],
  "chat_template_kwargs": {"thinking_mode": "enabled"}})";

}  // namespace

TEST_CASE("parse-output: M3 reasoning and tool calls, whole and one token at a time") {
  const std::string text = "Weather needed.</mm:think>On it.\n" + NS + "<tool_call>\n" + NS +
                           "<invoke name=\"get_weather\">" + NS + "<city>Paris" + NS + "</city>" +
                           NS + "<days>2" + NS + "</days>" + NS + "<opts>" + NS + "<hours>" + NS +
                           "<item>9" + NS + "</item>" + NS + "</hours>" + NS + "</opts>" + NS +
                           "</invoke>\n" + NS + "</tool_call>[e~[";
  const auto whole = ParseOutput("m3-chat/model", kRequest, text);
  CAPTURE(whole.err);
  REQUIRE(whole.exit_code == 0);
  const Json j = Json::parse(whole.out);
  CHECK(j["reasoning_content"] == "Weather needed.");
  CHECK(j["content"] == "On it.\n");
  CHECK(j["finish_reason"] == "tool_calls");
  REQUIRE(j["tool_calls"].size() == 1);
  CHECK(j["tool_calls"][0]["name"] == "get_weather");
  CHECK(Json::parse(j["tool_calls"][0]["arguments"].get<std::string>()) ==
        Json::parse(R"({"city": "Paris", "days": 2, "opts": {"hours": [9]}})"));
  for (const char* n : {"1", "2", "5"}) {
    const auto chunked = ParseOutput("m3-chat/model", kRequest, text, {"--chunk-tokens", n});
    CHECK(chunked.exit_code == 0);
    CHECK(chunked.out == whole.out);
  }
  // With the tool-call parser off the markup is text (its special tokens skipped).
  const auto off = ParseOutput("m3-chat/model", kRequest, text, {"--tool-call-parser", "none"});
  REQUIRE(off.exit_code == 0);
  CHECK(Json::parse(off.out)["tool_calls"].empty());
  CHECK(Json::parse(off.out)["content"].get<std::string>().find("<invoke") != std::string::npos);
}

TEST_CASE("parse-output: the M2 format from an M2 model directory, or forced by flags") {
  const std::string text =
      "Hm.</think>\n\nOK.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter "
      "name=\"city\">Rome</parameter>\n</invoke>\n</minimax:tool_call>[e~[";
  const std::string request = R"({"tools": [{"type": "function", "function": {"name":
    "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]})";
  const auto r = ParseOutput("chat-e2e/model", request, text, {"--chunk-tokens", "1"});
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  const Json j = Json::parse(r.out);
  CHECK(j["reasoning_content"] == "Hm.");
  CHECK(j["content"] == "OK.\n");
  REQUIRE(j["tool_calls"].size() == 1);
  CHECK(j["tool_calls"][0]["arguments"] == R"({"city":"Rome"})");
  // The same text through the M3 parsers finds no M3 markup.
  const auto m3 =
      ParseOutput("chat-e2e/model", request, text,
                  {"--reasoning-parser", "minimax_m3", "--tool-call-parser", "minimax_m3"});
  REQUIRE(m3.exit_code == 0);
  CHECK(Json::parse(m3.out)["tool_calls"].empty());
}

TEST_CASE("parse-output: bad input gets a clear message and a non-zero exit") {
  const std::string dir = m3::test::TempDir();
  m3::test::WriteFile(dir + "/t.txt", "x");
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {m3::test::BinPath("m3-gateway"), "parse-output"});
    return m3::test::RunProcess(args);
  };
  const std::string model = m3::test::DataPath("m3-chat/model");
  m3::test::WriteFile(dir + "/bad.json", "{not json");
  auto r = run({"--model", model, "--request", dir + "/bad.json", "--text-file", dir + "/t.txt"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("not JSON") != std::string::npos);
  m3::test::WriteFile(dir + "/arr.json", "[]");
  r = run({"--model", model, "--request", dir + "/arr.json", "--text-file", dir + "/t.txt"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("JSON object") != std::string::npos);
  m3::test::WriteFile(dir + "/tools.json", R"({"tools": "x"})");
  r = run({"--model", model, "--request", dir + "/tools.json", "--text-file", dir + "/t.txt"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("\"tools\"") != std::string::npos);
  r = run({"--model", model, "--request", dir + "/missing.json", "--text-file", dir + "/t.txt"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("missing.json") != std::string::npos);
  r = run({"--model", dir, "--request", dir + "/tools.json", "--text-file", dir + "/t.txt"});
  CHECK(r.exit_code != 0);
  CHECK(!r.err.empty());
  m3::test::WriteFile(dir + "/ok.json", "{}");
  r = run({"--model", model, "--request", dir + "/ok.json", "--text-file", dir + "/t.txt",
           "--reasoning-parser", "nope"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("--reasoning-parser") != std::string::npos);
  r = run(
      {"--model", model, "--request", dir + "/ok.json", "--text-file", dir, "--chunk-tokens", "1"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("directory") != std::string::npos);
  r = run({"--model", model, "--request", dir + "/ok.json", "--text-file", dir + "/t.txt",
           "--chunk-tokens", "-1"});
  CHECK(r.exit_code != 0);
}

TEST_CASE("serve: the parser flags take only the known formats") {
  const auto r = m3::test::RunProcess({m3::test::BinPath("m3-gateway"), "serve", "--model",
                                       m3::test::DataPath("m3-chat/model"), "--engine",
                                       "127.0.0.1:1", "--reasoning-parser", "deepseek_r1"});
  CHECK(r.exit_code != 0);
  CHECK((r.err + r.out).find("--reasoning-parser") != std::string::npos);
  const auto help = m3::test::RunProcess({m3::test::BinPath("m3-gateway"), "serve", "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--tool-call-parser") != std::string::npos);
  CHECK(help.out.find("minimax_m3") != std::string::npos);
}
